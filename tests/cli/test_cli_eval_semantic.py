"""`crossview eval` on a semantic benchmark (PF-WILLOW fixture) with the bundled TransforMatcher."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from cli_runner import run_cli
from crossview.cli.app import main
from crossview.data import io
from pfwillow_files import write_pfwillow_folder


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


def test_eval_pfwillow_folder_shows_categories_beside_raw_correlation_and_identity(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    root = tmp_path / "real-semantic"
    write_pfwillow_folder(root, np.random.default_rng(0))
    out = tmp_path / "result.json"
    code, stdout, _ = run_cli(["eval", "--model", "transformatcher", "--dataset",
                               f"pfwillow:{root}", "--json", str(out), "--no-per-sample"],
                              capsys)
    assert code in (0, None)
    table = [line for line in stdout.splitlines() if "│" in line]
    labels = [tuple(cell.strip() for cell in line.split("│")[1:3]) for line in table]
    assert labels == [(category, method) for category in ("car", "duck", "mean")
                      for method in ("transformatcher", "raw correlation", "identity")]
    result = json.loads(out.read_text())
    assert list(result["categories"]) == ["car", "duck"]
    assert {m.split("_")[1] for m in result["metrics"]} == {"bbox-kp", "bbox"}
    runs = {run["name"]: run for run in result["baselines"]}
    assert list(runs) == ["raw correlation", "identity"]
    # the two images of a pair are one picture with the same keypoints: copying is exact
    assert set(runs["identity"]["mean"].values()) == {100.0}
    assert runs["raw correlation"]["samples"] == result["samples"] == 4
    for category in ("car", "duck"):
        pairs = [row for row in result["per_sample"] if row["name"].startswith(category)]
        mean = sum(row["pck@0.1_bbox-kp"] for row in pairs) / len(pairs)
        assert result["categories"][category]["pck@0.1_bbox-kp"]["image_mean"] == mean


def test_eval_pfwillow_folder_bad_row_is_one_error_line(tmp_path: Path,
                                                         capsys: pytest.CaptureFixture[str]
                                                         ) -> None:
    root = tmp_path / "real-semantic"
    write_pfwillow_folder(root, np.random.default_rng(0))
    lines = (root / "pairs.csv").read_text().splitlines()
    lines[2] = lines[2].replace(";", ";x", 1)
    (root / "pairs.csv").write_text("\n".join(lines) + "\n")
    out = tmp_path / "result.json"
    code, _, stderr = run_cli(["eval", "--model", "transformatcher", "--dataset",
                               f"pfwillow:{root}", "--json", str(out)], capsys)
    assert code == 2 and not out.exists()
    assert stderr.strip().splitlines() == [
        f"error: {root / 'pairs.csv'}:3: src_kps: expected 10 keypoints as 20 finite numbers "
        "x1;y1;...;x10;y10"]
    (root / "keypoints.csv").unlink()
    code, _, stderr = run_cli(["eval", "--model", "transformatcher", "--dataset",
                               f"pfwillow:{root}"], capsys)
    assert code == 2 and stderr.strip().splitlines() == [
        f"error: {root / 'keypoints.csv'}: not found; expected PF-WILLOW/ with test_pairs.csv "
        "and the <class>(<subset>)/ image folders, or a folder with pairs.csv, keypoints.csv "
        "and images/<subclass>/"]
