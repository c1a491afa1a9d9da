"""The classical baselines: cached outputs, OpenCV runs (skipped without OpenCV), the real-dev
scenes' cached files reproduced to a stated tolerance."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from scipy.ndimage import gaussian_filter

from crossview import baselines
from crossview.data import io
from crossview.data.datasets import SceneFolders
from crossview.metrics import get_metrics
from crossview.models.dense import classical

REAL_DEV = Path(__file__).resolve().parents[2] / "shared" / "real-dev"
STEREO = ["bad1_holes", "bad2_holes", "bad3_holes", "epe_holes"]
FLOW = ["epe_holes", "fl_all_holes"]


def _texture(rng: np.random.Generator, size: tuple[int, int]) -> np.ndarray:
    """A smooth random RGB texture ``[H, W, 3]`` uint8 that block matching can lock on to."""
    noise = gaussian_filter(rng.normal(0, 1, (*size, 3)), sigma=(1.5, 1.5, 0))
    return np.clip(128 + 60 * noise / noise.std(), 0, 255).astype(np.uint8)


def _write_scene(folder: Path, task: str, first: np.ndarray, second: np.ndarray,
                 truth: np.ndarray) -> None:
    folder.mkdir(parents=True)
    names = ("left", "right", "gt") if task == "stereo" else ("frame0", "frame1", "flow")
    io.write_image(folder / f"{names[0]}.png", first)
    io.write_image(folder / f"{names[1]}.png", second)
    io.write_npy(folder / f"{names[2]}.npy", truth.astype(np.float32))


@pytest.mark.parametrize(("max_disparity", "expected"),
                         [(52.75, 64), (20.0012, 32), (14.5, 16), (0.0, 16)])
def test_sgbm_range_is_the_oracle_formula(max_disparity: float, expected: int) -> None:
    assert baselines.sgbm_num_disparities(max_disparity) == expected


def test_sgbm_recovers_a_constant_shift() -> None:
    pytest.importorskip("cv2")
    left = _texture(np.random.default_rng(0), (48, 96))
    right = np.roll(left, -6, axis=1)  # left (x, y) matches right (x - 6, y)
    disparity = baselines.sgbm_disparity(left, right, 16)
    inner = disparity[8:-8, 24:-8]
    assert np.isfinite(inner).mean() > 0.9
    assert np.nanmedian(inner) == pytest.approx(6.0, abs=0.1)
    assert np.isnan(disparity[:, :3]).all()  # no match beyond the right image: holes


def test_dis_recovers_a_constant_shift() -> None:
    pytest.importorskip("cv2")
    frame0 = _texture(np.random.default_rng(1), (64, 96))
    frame1 = np.roll(frame0, (2, 3), axis=(0, 1))  # frame0 (x, y) moves to (x + 3, y + 2)
    flow = baselines.dis_flow(frame0, frame1)
    assert flow.shape == (64, 96, 2)
    np.testing.assert_allclose(np.median(flow[8:-8, 8:-8], axis=(0, 1)), [3.0, 2.0], atol=0.1)


@pytest.fixture
def two_stereo_scenes(tmp_path: Path) -> Path:
    """``cached/`` (with an sgbm.npy whose holes are known) and ``plain/`` (none)."""
    rng = np.random.default_rng(2)
    left = _texture(rng, (32, 96))
    truth = np.full((32, 96), 4.0)
    for name in ("cached", "plain"):
        _write_scene(tmp_path / name, "stereo", left, np.roll(left, -4, axis=1), truth)
    raw = np.full((32, 96), 4 * 16, np.int16)
    raw[:, :12] = -16  # an eighth of the pixels are holes
    io.write_npy(tmp_path / "cached" / "sgbm.npy", raw)
    return tmp_path


def test_cached_output_is_used_and_holes_count(two_stereo_scenes: Path,
                                               monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(baselines, "cv2", None)
    monkeypatch.setattr(classical, "cv2", None)
    dataset = SceneFolders(two_stereo_scenes, task="stereo")
    run = baselines.evaluate_baseline(dataset, get_metrics("stereo", STEREO))
    assert run.sources == {"cached": "cached sgbm.npy"} and run.missing == ["plain"]
    assert [name for name, _ in run.result.rows] == ["cached"]
    # the holes' error is |gt| = 4 px, and they are bad at every threshold
    assert run.result.mean() == pytest.approx({"bad1_holes": 12.5, "bad2_holes": 12.5,
                                               "bad3_holes": 12.5, "epe_holes": 0.5})
    payload = run.to_dict()
    assert payload["not_available"] == "not available (pip install opencv-python-headless)"
    assert payload["opencv"] is None


def test_without_opencv_or_cache_nothing_is_scored(two_stereo_scenes: Path,
                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(baselines, "cv2", None)
    monkeypatch.setattr(classical, "cv2", None)
    dataset = SceneFolders(two_stereo_scenes / "plain", task="stereo")
    run = baselines.evaluate_baseline(dataset, get_metrics("stereo", STEREO))
    assert run.result is None and run.missing == ["plain"] and run.sources == {}


def test_opencv_computes_scenes_without_a_cache(two_stereo_scenes: Path) -> None:
    cv2 = pytest.importorskip("cv2")
    dataset = SceneFolders(two_stereo_scenes, task="stereo")
    run = baselines.evaluate_baseline(dataset, get_metrics("stereo", STEREO))
    assert run.sources == {"cached": "cached sgbm.npy", "plain": f"OpenCV {cv2.__version__}"}
    assert run.missing == []
    computed = dict(run.result.rows)["plain"]
    sample = dataset[1]
    # the oracle range: ceil(1.1 * 4 / 16) * 16 = 16, so the first 16 columns are holes
    direct = baselines.sgbm_disparity(sample["image0"], sample["image1"], 16)
    assert np.isnan(direct[:, :16]).all()
    assert computed["bad1_holes"] == pytest.approx(
        get_metrics("stereo", ["bad1_holes"])[0].fn(direct, sample).value)
    assert computed["bad1_holes"] < 25  # 16.7 % holes, the rest mostly right


# Tolerances of an OpenCV run against the cached real-dev files (OpenCV 4.12). Measured with
# OpenCV 5.0: SGBM identical; DIS 0.005 px EPE and 0.19 points Fl apart, from the grey
# conversion (see crossview.baselines).
SGBM_TOLERANCE = {"bad1_holes": 0.05, "bad2_holes": 0.05, "bad3_holes": 0.05, "epe_holes": 0.005}
DIS_TOLERANCE = {"epe_holes": 0.02, "fl_all_holes": 0.5}


@pytest.mark.skipif(not REAL_DEV.is_dir(), reason="shared/real-dev not available")
@pytest.mark.parametrize(("task", "metrics", "tolerance"), [("stereo", STEREO, SGBM_TOLERANCE),
                                                            ("flow", FLOW, DIS_TOLERANCE)])
def test_opencv_reproduces_the_cached_real_dev_scores(task: str, metrics: list[str],
                                                      tolerance: dict[str, float]) -> None:
    pytest.importorskip("cv2")
    dataset = SceneFolders(REAL_DEV, task=task)
    specs = get_metrics(task, metrics)
    for index, name in enumerate(dataset.names()):
        sample = dataset[index]
        computed = baselines.BASELINES[task][0].compute(sample)
        for spec in specs:
            cached = spec.fn(sample["baseline"], sample).value
            assert spec.fn(computed, sample).value == pytest.approx(
                cached, abs=tolerance[spec.name]), (name, spec.name)


def _fill_naive(disparity: np.ndarray) -> np.ndarray:
    """Middlebury's rule, one pixel at a time."""
    out = np.zeros_like(disparity, dtype=np.float32)
    for y, row in enumerate(disparity):
        for x, value in enumerate(row):
            if np.isfinite(value):
                out[y, x] = value
                continue
            left = [v for v in row[:x][::-1] if np.isfinite(v)][:1]
            right = [v for v in row[x + 1:] if np.isfinite(v)][:1]
            out[y, x] = min(left + right) if left + right else 0.0
    return out


@pytest.mark.parametrize("seed", range(5))
def test_fill_holes_equals_the_rule_pixel_by_pixel(seed: int) -> None:
    rng = np.random.default_rng(seed)
    disparity = rng.uniform(1, 50, (7, 23)).astype(np.float32)
    disparity[rng.random(disparity.shape) < 0.5] = np.nan
    disparity[3] = np.nan  # a row without any valid pixel becomes 0
    filled = baselines.fill_holes(disparity)
    np.testing.assert_array_equal(filled, _fill_naive(disparity))
    assert not filled[3].any()
    known = np.isfinite(disparity)
    np.testing.assert_array_equal(filled[known], disparity[known])


def test_fill_holes_refuses_a_wrong_shape() -> None:
    with pytest.raises(ValueError, match=r"disparity must be \[H, W\]"):
        baselines.fill_holes(np.zeros((2, 3, 4)))


def test_filled_baseline_scores_the_filled_cached_output(two_stereo_scenes: Path,
                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(baselines, "cv2", None)
    monkeypatch.setattr(classical, "cv2", None)
    dataset = SceneFolders(two_stereo_scenes / "cached", task="stereo")
    raw, filled = (baselines.evaluate_baseline(dataset, get_metrics("stereo", STEREO),
                                               baseline=method)
                   for method in baselines.BASELINES["stereo"])
    assert filled.baseline.name == "SGBM filled" and filled.sources == raw.sources
    # the hole columns take the valid value to their right: every pixel is right
    assert raw.result.mean()["bad1_holes"] == pytest.approx(12.5)
    assert filled.result.mean() == pytest.approx({"bad1_holes": 0.0, "bad2_holes": 0.0,
                                                  "bad3_holes": 0.0, "epe_holes": 0.0})


def test_the_semantic_identity_copies_the_keypoints_on_any_dataset() -> None:
    rng = np.random.default_rng(0)
    keypoints = rng.uniform(0, 40, (6, 2)).astype(np.float32)
    # the target keypoints are the source ones moved by 0, 3 and 30 px along x
    samples = [{"name": f"p{i}", "category": "c", "image1": np.zeros((50, 50, 3), np.uint8),
                "keypoints0": keypoints, "keypoints1": keypoints + np.float32([shift, 0]),
                "valid_keypoints": np.ones(6, bool)} for i, shift in enumerate((0, 3, 30))]
    run = baselines.evaluate_baseline(samples, get_metrics("semantic", ["pck@0.05_img"]),
                                      baseline=baselines.BASELINES["semantic"][0])
    assert run.baseline.name == "identity" and run.missing == []
    # the threshold is 0.05 * 50 = 2.5 px: only the unmoved pair is right
    assert [values["pck@0.05_img"] for _, values in run.result.rows] == [100.0, 0.0, 0.0]
    assert run.to_dict()["categories"]["c"]["pck@0.05_img"]["image_mean"] == pytest.approx(
        100 / 3)
