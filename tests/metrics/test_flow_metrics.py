from __future__ import annotations

import math

import numpy as np
import pytest

from crossview.metrics import fl_all, flow_accuracy, flow_endpoint_error, flow_outliers

# per-pixel ground truth and prediction with end-point errors 0, 1, 3, 5 (3-4-5 triangle), 10
GT = np.array([[[0.0, 0.0], [10.0, 0.0], [0.0, 100.0], [40.0, 30.0], [1e10, 0.0]]])
PRED = np.array([[[0.0, 0.0], [10.0, 1.0], [0.0, 103.0], [43.0, 34.0], [0.0, 0.0]]])
# the last pixel has unknown ground truth (> 1e9) and is never evaluated


def test_flow_epe_is_euclidean_and_skips_unknown() -> None:
    score = flow_endpoint_error(PRED, GT)
    assert score.count == 4
    assert score.value == pytest.approx((0 + 1 + 3 + 5) / 4)
    valid = np.array([[True, False, True, True, True]])
    assert flow_endpoint_error(PRED, GT, valid).value == pytest.approx(8 / 3)


@pytest.mark.parametrize(("threshold", "expected"), [(1.0, 1), (3.0, 2), (5.0, 3)])
def test_accuracy_is_strictly_less(threshold: float, expected: int) -> None:
    assert flow_accuracy(PRED, GT, None, threshold).value == pytest.approx(100 * expected / 4)


def test_outliers_strictly_greater() -> None:
    assert flow_outliers(PRED, GT, None, 3.0).value == pytest.approx(25.0)


def test_fl_all_needs_absolute_and_relative() -> None:
    # EPE 5 at |gt| = 50: 10% -> outlier; EPE 3 at |gt| 100 is not > 3 px
    assert fl_all(PRED, GT).value == pytest.approx(25.0)
    gt = np.array([[[100.0, 0.0], [10.0, 0.0]]])
    pred = np.array([[[104.0, 0.0], [14.0, 0.0]]])  # 4% (inlier) and 40% (outlier)
    assert fl_all(pred, gt).value == pytest.approx(50.0)


def test_shape_errors() -> None:
    with pytest.raises(ValueError, match=r"prediction\.shape"):
        flow_endpoint_error(PRED[..., :1], GT)


def test_nan_prediction_propagates() -> None:
    pred = PRED.copy()
    pred[0, 1, 0] = np.nan
    scores = [flow_endpoint_error(pred, GT), fl_all(pred, GT), flow_outliers(pred, GT, None, 3.0),
              flow_accuracy(pred, GT, None, 1.0)]
    assert all(score.count == 4 and math.isnan(score.value) for score in scores)
    pred = PRED.copy()
    pred[0, 4] = np.nan  # unknown ground truth: not evaluated
    assert flow_outliers(pred, GT, None, 3.0) == flow_outliers(PRED, GT, None, 3.0)


# holes: (NaN, 0) at |gt| 5 and (inf, inf) at |gt| 0.1; one pixel with EPE 1 at |gt| 10
HOLE_GT = np.array([[[3.0, 4.0], [0.1, 0.0], [10.0, 0.0]]])
HOLE_PRED = np.array([[[np.nan, 0.0], [np.inf, np.inf], [10.0, 1.0]]])


@pytest.mark.parametrize(("metric", "expected"), [
    (lambda p, g: flow_endpoint_error(p, g, count_holes=True), (5 + 0.1 + 1) / 3),  # ||gt||
    (lambda p, g: fl_all(p, g, count_holes=True), 200 / 3),  # a hole is an outlier at 0.1 px
    (lambda p, g: flow_outliers(p, g, None, 3.0, count_holes=True), 200 / 3),
    (lambda p, g: flow_accuracy(p, g, None, 5.0, count_holes=True), 100 / 3),  # never accurate
])
def test_holes_count_as_errors(metric, expected: float) -> None:
    score = metric(HOLE_PRED, HOLE_GT)
    assert score.count == 3 and score.value == pytest.approx(expected)
