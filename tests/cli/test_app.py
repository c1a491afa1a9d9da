from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

from crossview import __version__
from crossview.cli.app import main
from hang_guard import HANG_GUARD_SECONDS


def test_version_prints_and_exits_zero(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as done:
        main(["--version"])
    assert done.value.code == 0
    assert capsys.readouterr().out.strip() == f"crossview {__version__}"


def test_help_lists_bench_group(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as done:
        main(["--help"])
    assert done.value.code == 0
    assert "bench" in capsys.readouterr().out


def test_unknown_command_is_a_usage_error_with_exit_code_2() -> None:
    result = subprocess.run(
        [sys.executable, "-m", "crossview", "no-such-command"], capture_output=True, text=True,
        timeout=HANG_GUARD_SECONDS)
    assert result.returncode == 2
    assert "Traceback" not in result.stderr


# Runs the CLI with MODULE.NAME replaced: its HANG_AT-th call says "working" and waits.
_HANG = textwrap.dedent("""
    import importlib, sys, time
    module, name, hang_at, argv = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4:]
    owner = importlib.import_module(module)
    original, calls = getattr(owner, name), []
    def then_hang(*args, **kwargs):
        calls.append(1)
        if len(calls) == hang_at:
            print("working", flush=True)
            time.sleep(600)
        return original(*args, **kwargs)
    setattr(owner, name, then_hang)
    from crossview.cli.app import main
    main(argv)
""")


def _images(folder: Path) -> Path:
    folder.mkdir()
    rng = np.random.default_rng(0)
    for name in ("a.png", "b.png"):
        Image.fromarray(rng.integers(0, 256, (192, 200, 3), dtype=np.uint8)).save(folder / name)
    return folder


@pytest.mark.parametrize("command", ["stereo", "flow", "match", "rectify"])
@pytest.mark.parametrize("name", ["depth.png", "result.PFM", "out.npy"])
def test_an_output_directory_named_like_a_file_is_one_error_and_makes_nothing(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], command: str, name: str) -> None:
    """``-o depth.png`` (a file name where the outputs' directory is asked for; the runtime's
    ``-o`` takes a file) is refused before any work, with the directory to give instead."""
    images = _images(tmp_path / "in")
    out = tmp_path / name
    with pytest.raises(SystemExit) as done:
        main([command, str(images / "a.png"), str(images / "b.png"), "-o", str(out)])
    err = capsys.readouterr().err.strip()
    assert done.value.code == 2
    assert err == (f"error: --out {out}: names the directory the outputs are written into, "
                   f"and {name!r} looks like a file name; give a directory, e.g. --out "
                   f"{out.with_suffix('')}")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["in"]


def test_an_existing_directory_named_like_a_file_is_taken_as_given(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    images = _images(tmp_path / "in")
    out = tmp_path / "results.png"
    out.mkdir()
    with pytest.raises(SystemExit) as done:
        main(["stereo", str(images / "a.png"), str(images / "b.png"), "--model",
              "matchstereo-mini", "-o", str(out)])
    assert done.value.code == 0
    assert (out / "a_disp.pfm").is_file()


@pytest.mark.parametrize(("patch", "args", "kept"), [
    # the second pair: a run of many pairs keeps the first, published when it was done
    ("crossview.api estimate_disparity 2", "stereo {in} {in} --model matchstereo-mini -o {out}",
     ["a_disp.pfm", "a_disp_color.png", "a_disp_noc.png"]),
    ("crossview.api estimate_flow 2", "flow {in} {in} --model matchflow-mini -o {out}",
     ["a_flow.flo", "a_flow_color.png", "a_flow_noc.png"]),
    ("crossview.api match_keypoints 1", "match {in}/a.png {in}/b.png -o {out}", []),
    ("crossview.eval evaluate 1", "eval --model matchstereo-mini --dataset "
                                      "synthetic-stereo,length=1,size=64x96 --json {out}/e.json",
     []),
])
def test_sigterm_during_the_work_is_one_line_and_leaves_the_outputs_as_they_were(
        tmp_path: Path, patch: str, args: str, kept: list[str]) -> None:
    inputs, out = _images(tmp_path / "in"), tmp_path / "out"
    out.mkdir()
    (out / "older.txt").write_text("an earlier result")
    argv = args.format(**{"in": inputs, "out": out}).split()
    with subprocess.Popen([sys.executable, "-c", _HANG, *patch.split(), *argv],
                          stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) as child:
        try:
            assert child.stdout.readline() == "working\n"
            child.send_signal(signal.SIGTERM)
            _, err = child.communicate(timeout=HANG_GUARD_SECONDS)
        finally:
            child.kill()
    assert child.returncode == 128 + signal.SIGTERM, err
    # (a note may say that the fused kernels are being compiled by another process)
    # (and, off a terminal, a progress line per finished pair)
    lines = [line for line in err.splitlines()
             if not line.startswith(("warning:", "note:", "pair "))]
    assert lines == ["error: stopped by SIGTERM; outputs not yet published were discarded"], err
    # no output of the interrupted work, no staging
    assert sorted(p.name for p in out.iterdir()) == sorted(["older.txt", *kept])


def _crossview(args: list[str], columns: str | None) -> subprocess.CompletedProcess:
    """``crossview ARGS`` in a subprocess whose stdout and stderr are pipes, with ``COLUMNS``
    set to ``columns`` (``None``: unset)."""
    env = {k: v for k, v in os.environ.items() if k != "COLUMNS"}
    if columns is not None:
        env["COLUMNS"] = columns
    return subprocess.run([sys.executable, "-m", "crossview", *args], capture_output=True,
                          text=True, env=env, timeout=HANG_GUARD_SECONDS)


@pytest.mark.parametrize("columns", ["0", "1", None], ids=["COLUMNS=0", "COLUMNS=1", "a pipe"])
def test_output_and_errors_appear_at_any_terminal_width(tmp_path: Path,
                                                        columns: str | None) -> None:
    path = _crossview(["weights", "path", "matchstereo-t"], columns)
    assert path.returncode == 0 and path.stdout.strip().endswith("matchstereo_tiny_fsd.pth")
    error = _crossview(["train", str(tmp_path / "absent.yaml")], columns)
    assert error.returncode == 2 and error.stdout == ""
    assert error.stderr == f"error: config file not found: {tmp_path / 'absent.yaml'}\n"
    if columns == "0":  # a table: every cell whole (folded where narrow, never cut)
        listed = _crossview(["weights", "list"], columns)
        assert listed.returncode == 0 and "…" not in listed.stdout
        for name in ("matchstereo-t", "matchstereo_tiny_fsd.pth", "matchflow-b"):
            assert name in listed.stdout, listed.stdout


@pytest.mark.parametrize("command", [[], ["stereo"], ["flow"], ["eval"], ["train"], ["match"],
                                     ["bench", "model"], ["export", "onnx"], ["weights", "list"],
                                     ["experiment"], ["plot-log"], ["models"]])
def test_help_imports_neither_torch_nor_numpy(command: list[str]) -> None:
    """``crossview [COMMAND] --help`` starts at once: the api, torch and numpy load only when a
    command runs (:mod:`crossview.lazy`)."""
    script = ("import sys\nfrom crossview.cli.app import main\ntry:\n"
              f"    main({[*command, '--help']!r})\nexcept SystemExit as done:\n"
              "    assert done.code == 0, done.code\n"
              "print(sorted(m for m in ('torch', 'numpy', 'crossview.api') if m in sys.modules))")
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                          check=True, env={**os.environ, "COLUMNS": "80"})
    assert done.stdout.strip().splitlines()[-1] == "[]", done.stderr
