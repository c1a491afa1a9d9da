"""`crossview eval` on a semantic benchmark (PF-WILLOW fixture) with the bundled TransforMatcher."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from crossview.cli.app import main
from crossview.data import io


def _pfwillow_tree(root: Path) -> None:
    """One PF-WILLOW pair: the target is the source itself, so transfer is an identity."""
    rng = np.random.default_rng(0)
    image = rng.integers(0, 256, (64, 64, 3), dtype=np.uint8)
    for name in ("car_g_0001.png", "car_g_0002.png"):
        (root / "car(G)").mkdir(parents=True, exist_ok=True)
        io.write_image(root / "car(G)" / name, image)
    header = ["imageA", "imageB"] + [f"{c}{i}" for c in ("XA", "YA", "XB", "YB")
                                     for i in range(1, 11)]
    xs, ys = np.linspace(8, 56, 10), np.linspace(10, 50, 10)
    row = ["PF-dataset/car(G)/car_g_0001.png", "PF-dataset/car(G)/car_g_0002.png",
           *map(str, np.concatenate([xs, ys, xs, ys]))]
    (root / "test_pairs.csv").write_text(",".join(header) + "\n" + ",".join(row) + "\n")


def test_eval_runs_transformatcher_on_pfwillow(tmp_path: Path) -> None:
    _pfwillow_tree(tmp_path / "PF-WILLOW")
    out = tmp_path / "result.json"
    with pytest.raises(SystemExit) as done:
        main(["eval", "--model", "transformatcher", "--dataset",
              f"pfwillow:{tmp_path / 'PF-WILLOW'}", "--json", str(out), "--no-per-sample"])
    assert done.value.code in (0, None)
    result = json.loads(out.read_text())
    pck = [value for key, value in result["summary"].items() if key.startswith("pck@0.1")]
    assert pck, result["summary"].keys()
    # identical images: most keypoints must land within 0.1 of the image size
    assert max(v["image_mean"] for v in pck) >= 50.0


def test_eval_semantic_refuses_a_stereo_model(tmp_path: Path,
                                               capsys: pytest.CaptureFixture[str]) -> None:
    _pfwillow_tree(tmp_path / "PF-WILLOW")
    with pytest.raises(SystemExit) as done:
        main(["eval", "--model", "matchstereo-t", "--dataset",
              f"pfwillow:{tmp_path / 'PF-WILLOW'}"])
    assert done.value.code == 2
    assert "transformatcher" in capsys.readouterr().err
