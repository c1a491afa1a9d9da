"""Scene folders written in the exact layouts (tiny images), one per ground-truth format."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest

from crossview.data import io
from crossview.data.datasets import SceneFolders, open_dataset
from crossview.data.sgbm_raw import disparity_from_sgbm
from crossview.errors import UserError

H, W = 6, 8


def _disparity(rng: np.random.Generator) -> np.ndarray:
    """Known disparities in quarter-pixel steps (exact in every format), NaN at two pixels."""
    disparity = np.round(rng.uniform(1, 40, (H, W)) * 4) / 4
    disparity[0, :2] = np.nan
    return disparity.astype(np.float32)


def _flow(rng: np.random.Generator) -> np.ndarray:
    """Flow in 1/64 px steps (exact in KITTI PNG), NaN at two pixels."""
    flow = np.round(rng.uniform(-20, 20, (H, W, 2)) * 64) / 64
    flow[1, 3:5] = np.nan
    return flow.astype(np.float32)


# format -> writer of ground truth with NaN = unknown into that format's file
STEREO_WRITERS: dict[str, Callable[[Path, np.ndarray], None]] = {
    "npy": io.write_npy,
    "pfm": lambda path, d: io.write_pfm(path, np.where(np.isnan(d), np.inf, d)),
    "png": lambda path, d: io.write_kitti_disparity(path, np.nan_to_num(d), np.isfinite(d)),
}
FLOW_WRITERS: dict[str, Callable[[Path, np.ndarray], None]] = {
    "npy": io.write_npy,
    "pfm": lambda path, f: io.write_pfm(path, np.concatenate(
        [np.where(np.isnan(f), np.inf, f), np.zeros((H, W, 1), np.float32)], axis=2)),
    "flo": lambda path, f: io.write_flo(path, np.where(np.isnan(f), 2e9, f)),
    "png": lambda path, f: io.write_kitti_flow(path, np.nan_to_num(f), np.isfinite(f).all(2)),
}


def stereo_scene(folder: Path, write_image, rng, fmt: str = "npy",
                 image_suffix: str = "png") -> dict:
    """Write ``folder/{left, right}.IMAGE, gt.FMT``; return what was written."""
    left = write_image(folder / f"left.{image_suffix}")
    right = write_image(folder / f"right.{image_suffix}")
    disparity = _disparity(rng)
    STEREO_WRITERS[fmt](folder / f"gt.{fmt}", disparity)
    return {"left": left, "right": right, "disparity": disparity}


def flow_scene(folder: Path, write_image, rng, fmt: str = "npy") -> dict:
    """Write ``folder/{frame0, frame1}.png, flow.FMT``; return what was written."""
    frame0, frame1 = write_image(folder / "frame0.png"), write_image(folder / "frame1.png")
    flow = _flow(rng)
    FLOW_WRITERS[fmt](folder / f"flow.{fmt}", flow)
    return {"frame0": frame0, "frame1": frame1, "flow": flow}


@pytest.mark.parametrize("fmt", sorted(STEREO_WRITERS))
def test_stereo_ground_truth_formats(tmp_path: Path, write_image, rng, fmt: str) -> None:
    written = stereo_scene(tmp_path / "scene", write_image, rng, fmt)
    sample = SceneFolders(tmp_path, task="stereo")[0]
    known = np.isfinite(written["disparity"])
    assert sample["name"] == "scene" and "baseline" not in sample
    np.testing.assert_array_equal(sample["image0"], written["left"])
    np.testing.assert_array_equal(sample["image1"], written["right"])
    np.testing.assert_array_equal(sample["valid"], known)
    np.testing.assert_array_equal(sample["disparity"], np.where(known, written["disparity"], 0))


@pytest.mark.parametrize("fmt", sorted(FLOW_WRITERS))
def test_flow_ground_truth_formats(tmp_path: Path, write_image, rng, fmt: str) -> None:
    written = flow_scene(tmp_path / "scene", write_image, rng, fmt)
    sample = SceneFolders(tmp_path, task="flow")[0]
    known = np.isfinite(written["flow"]).all(axis=2)
    np.testing.assert_array_equal(sample["image0"], written["frame0"])
    np.testing.assert_array_equal(sample["image1"], written["frame1"])
    np.testing.assert_array_equal(sample["valid"], known)
    np.testing.assert_array_equal(sample["flow"], np.where(known[..., None], written["flow"], 0))


def test_mixed_root_keeps_the_task_asked_for(tmp_path: Path, write_image, rng) -> None:
    stereo_scene(tmp_path / "b_stereo", write_image, rng, image_suffix="jpg")
    stereo_scene(tmp_path / "a_stereo", write_image, rng, "pfm")
    flow_scene(tmp_path / "c_flow", write_image, rng)
    (tmp_path / ".hidden").mkdir()  # hidden folders are not scenes
    assert SceneFolders(tmp_path, task="stereo").names() == ["a_stereo", "b_stereo"]
    assert SceneFolders(tmp_path, task="flow").names() == ["c_flow"]


def test_a_single_scene_folder_is_a_root(tmp_path: Path, write_image, rng,
                                         monkeypatch: pytest.MonkeyPatch) -> None:
    flow_scene(tmp_path / "000045", write_image, rng)
    assert SceneFolders(tmp_path / "000045", task="flow").names() == ["000045"]
    monkeypatch.chdir(tmp_path / "000045")
    assert SceneFolders(".", task="flow")[0]["name"] == "000045"


def test_cached_baselines_are_read_in_the_prediction_layout(tmp_path: Path, write_image,
                                                            rng) -> None:
    stereo_scene(tmp_path / "s", write_image, rng)
    raw = np.array(rng.integers(-16, 40 * 16, (H, W)), np.int16)
    raw[2, 2] = -16  # SGBM's hole value at minDisparity 0
    io.write_npy(tmp_path / "s" / "sgbm.npy", raw)
    flow_scene(tmp_path / "f", write_image, rng)
    dis = rng.normal(0, 3, (H, W, 2)).astype(np.float32)
    io.write_npy(tmp_path / "f" / "dis_medium.npy", dis)
    stereo = SceneFolders(tmp_path, task="stereo")
    assert stereo.cached_baseline(0) == tmp_path / "s" / "sgbm.npy"
    baseline = stereo[0]["baseline"]
    assert np.isnan(baseline[2, 2]) and np.isnan(baseline[raw < 0]).all()
    np.testing.assert_array_equal(baseline[raw >= 0], raw[raw >= 0] / 16)
    np.testing.assert_array_equal(disparity_from_sgbm(raw), baseline)
    np.testing.assert_array_equal(SceneFolders(tmp_path, task="flow")[0]["baseline"], dis)


def test_the_registry_picks_the_scenes_of_the_task(tmp_path: Path, write_image, rng) -> None:
    stereo_scene(tmp_path / "s", write_image, rng)
    flow_scene(tmp_path / "f", write_image, rng)
    for task in ("stereo", "flow"):
        dataset, kind = open_dataset(f"scenes:{tmp_path}", task=task)
        assert kind.task == task and kind.baseline and dataset.task == task
    with pytest.raises(UserError, match="'scenes' holds flow or stereo data"):
        open_dataset(f"scenes:{tmp_path}")


def _write_bad(case: str, root: Path, write_image, rng) -> Path:
    """Lay out the bad input ``case`` under ``root``; return the file the error must name."""
    scene = root / "scene"
    if case == "empty root":
        return root
    if case.startswith("flow") or case == "only flow scenes":
        flow_scene(scene, write_image, rng)
    else:
        stereo_scene(scene, write_image, rng)
    gt, flow = scene / "gt.npy", scene / "flow.npy"
    if case == "gt wrong size":
        io.write_npy(gt, np.zeros((H, W + 1), np.float32))
    elif case == "gt wrong dtype":
        io.write_npy(gt, np.zeros((H, W), np.int32))
    elif case == "gt wrong shape":
        io.write_npy(gt, np.zeros((H, W, 2), np.float32))
    elif case == "gt corrupt":
        gt.write_bytes(b"\x93NUMPY garbage")
    elif case == "gt pfm corrupt":
        gt.unlink()
        gt = scene / "gt.pfm"
        gt.write_bytes(b"Pf\n8 6\n-1.0\n" + b"\0" * 10)
    elif case == "gt 8-bit png":
        gt.unlink()
        gt = scene / "gt.png"
        io.write_image(gt, np.zeros((H, W), np.uint8))
    elif case == "gt all unknown":
        io.write_npy(gt, np.full((H, W), np.nan, np.float32))
    elif case == "gt negative":
        io.write_npy(gt, np.full((H, W), -3.0, np.float32))
    elif case == "gt missing":
        gt.unlink()
        return scene / "gt"
    elif case == "two gt files":
        io.write_pfm(scene / "gt.pfm", np.ones((H, W), np.float32))
        return scene
    elif case == "gt unsupported type":
        gt.rename(scene / "gt.txt")
        return scene / "gt.txt"
    elif case == "left without right":
        (scene / "right.png").unlink()
        return scene / "right"
    elif case == "right wrong size":
        write_image(scene / "right.png", (H + 2, W))
        return scene / "right.png"
    elif case == "sgbm wrong dtype":
        io.write_npy(scene / "sgbm.npy", np.zeros((H, W), np.float32))
        return scene / "sgbm.npy"
    elif case == "stray folder":
        (root / "notes").mkdir()
        return root / "notes"
    elif case == "both tasks in one folder":
        write_image(scene / "frame0.png")
        return scene
    elif case == "only flow scenes":
        return root
    elif case == "flow wrong channels":
        io.write_npy(flow, np.zeros((H, W, 3), np.float32))
        return flow
    elif case == "flow wrong size":
        io.write_npy(flow, np.zeros((H - 1, W, 2), np.float32))
        return flow
    elif case == "flow dis wrong shape":
        io.write_npy(scene / "dis_medium.npy", np.zeros((H, W), np.float32))
        return scene / "dis_medium.npy"
    return gt


BAD_CASES = [
    ("empty root", "found no scenes"),
    ("gt wrong size", "6x9 pixels, but left.png is 6x8"),
    ("gt wrong dtype", "expected float values"),
    ("gt wrong shape", "expected [H, W], got shape (6, 8, 2)"),
    ("gt corrupt", "cannot read .npy"),
    ("gt pfm corrupt", "truncated or corrupt PFM"),
    ("gt 8-bit png", "expected a 16-bit PNG"),
    ("gt all unknown", "no pixel has known ground truth"),
    ("gt negative", "negative disparities"),
    ("gt missing", "missing (a stereo scene needs left.*, right.* and gt.*)"),
    ("two gt files", "several gt.* files"),
    ("gt unsupported type", "unsupported file type"),
    ("left without right", "missing (a stereo scene needs"),
    ("right wrong size", "8x8 pixels, but left.png is 6x8"),
    ("sgbm wrong dtype", "expected OpenCV SGBM's raw int16"),
    ("stray folder", "not a scene folder"),
    ("both tasks in one folder", "holds both stereo"),
    ("only flow scenes", "holds no stereo scene (1 flow scene)"),
    ("flow wrong channels", "expected [H, W, 2], got shape (6, 8, 3)"),
    ("flow wrong size", "5x8 pixels, but frame0.png is 6x8"),
    ("flow dis wrong shape", "expected DIS flow [H, W, 2]"),
]


@pytest.mark.parametrize(("case", "message"), BAD_CASES, ids=[case for case, _ in BAD_CASES])
def test_bad_input_is_one_error_naming_the_file(tmp_path: Path, write_image, rng, case: str,
                                                message: str) -> None:
    root = tmp_path / "root"
    root.mkdir()
    named = _write_bad(case, root, write_image, rng)
    task = "flow" if case.startswith("flow") else "stereo"
    with pytest.raises(UserError) as raised:
        dataset = SceneFolders(root, task=task)
        dataset[0]
    text = str(raised.value)
    assert message in text and str(named) in text and "\n" not in text, text
