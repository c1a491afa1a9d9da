from __future__ import annotations

import numpy as np
import pytest

from crossview.metrics.keypoints import pck, pck_reference_size, sample_pck
from crossview.metrics.registry import get_metrics, list_metrics
from crossview.metrics.score import MetricAccumulator


def test_pck_counts_distances_within_the_threshold() -> None:
    gt = np.array([[10.0, 10.0], [20.0, 20.0], [30.0, 30.0], [0.0, 0.0]])
    pred = gt + np.array([[3.0, 4.0], [6.0, 8.0], [0.0, 5.1], [100.0, 0.0]])
    valid = np.array([True, True, True, False])
    score = pck(pred, gt, valid, threshold=5.0)
    assert (score.total, score.count) == (100.0, 3)  # only the first (distance exactly 5)
    assert pck(pred, gt, None, threshold=10.0).value == pytest.approx(75.0)


def test_reference_sizes() -> None:
    assert pck_reference_size("img", image_size=(240, 320)) == 320
    assert pck_reference_size("bbox", bbox=np.array([10, 20, 50, 120])) == 100
    kps = np.array([[5.0, 5.0], [25.0, 15.0], [0.0, 0.0]])
    valid = np.array([True, True, False])
    # The extent of the valid keypoints only: the zero-filled invalid point must not count.
    assert pck_reference_size("bbox-kp", keypoints=kps, valid=valid) == 20
    assert pck_reference_size("bbox-kp", keypoints=kps) == 25
    with pytest.raises(ValueError, match="kind"):
        pck_reference_size("box")


def test_padding_with_minus_two_would_inflate_the_threshold() -> None:
    # The widely copied evaluation pads to a fixed count with -2: the box then reaches (-2, -2).
    kps = np.array([[50.0, 60.0], [70.0, 90.0]])
    padded = np.vstack([kps, [[-2.0, -2.0]]])
    ours = pck_reference_size("bbox-kp", keypoints=padded, valid=np.array([True, True, False]))
    assert ours == 30
    assert pck_reference_size("bbox-kp", keypoints=padded) == 92


def test_registered_metrics_on_a_sample_and_both_reductions() -> None:
    assert {"pck@0.05_img", "pck@0.1_bbox", "pck@0.1_bbox-kp"} <= set(list_metrics("semantic"))
    sample = {"image1": np.zeros((100, 200, 3), np.uint8),
              "keypoints1": np.array([[10.0, 10.0], [50.0, 50.0], [0.0, 0.0]]),
              "valid_keypoints": np.array([True, True, False]),
              "bbox1": np.array([0.0, 0.0, 40.0, 80.0])}
    pred = sample["keypoints1"] + np.array([[9.0, 0.0], [11.0, 0.0], [0.0, 0.0]])
    assert sample_pck(pred, sample, 0.04, "img").value == 0.0  # threshold 8
    assert sample_pck(pred, sample, 0.05, "img").value == 50.0  # threshold 10
    assert sample_pck(pred, sample, 0.1, "img").value == 100.0  # threshold 20
    assert sample_pck(pred, sample, 0.125, "bbox").value == 50.0  # threshold 10
    assert sample_pck(pred, sample, 0.25, "bbox-kp").value == 50.0  # extent 40 -> 10
    acc = MetricAccumulator(get_metrics("semantic", ["pck@0.1_img"]))
    acc.update(pred, sample)
    acc.update(pred, {**sample, "valid_keypoints": np.array([True, False, False])})
    summary = acc.summary()["pck@0.1_img"]
    assert summary["pooled"] == pytest.approx(100.0)
    assert summary["image_mean"] == pytest.approx(100.0)


def test_shape_errors_name_the_arrays() -> None:
    with pytest.raises(ValueError, match="prediction"):
        pck(np.zeros((3, 2)), np.zeros((4, 2)), None, 1.0)
    with pytest.raises(ValueError, match="valid"):
        pck(np.zeros((3, 2)), np.zeros((3, 2)), np.ones(2, bool), 1.0)
    with pytest.raises(ValueError, match=r"box\.shape=\(3,\)"):
        pck_reference_size("bbox", bbox=np.zeros(3))
