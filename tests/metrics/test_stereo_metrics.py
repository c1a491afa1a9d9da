from __future__ import annotations

import math

import numpy as np
import pytest

from crossview.metrics import bad_pixels, d1, endpoint_error, get_metrics

# ground truth with one unknown pixel (inf) and prediction errors 0, 0.5, 1, 2, 4 (and one
# pixel masked out by ``valid``)
GT = np.array([[10.0, 10.0, 10.0, 100.0], [100.0, 50.0, np.inf, 10.0]])
PRED = np.array([[10.0, 10.5, 11.0, 98.0], [104.0, 53.5, 3.0, 30.0]])
VALID = np.array([[True, True, True, True], [True, True, True, False]])
# evaluated: errors 0, .5, 1, 2, 4, 3.5 (gt 10, 10, 10, 100, 100, 50)


def test_endpoint_error_hand_computed() -> None:
    score = endpoint_error(PRED, GT, VALID)
    assert score.count == 6
    assert score.value == pytest.approx((0 + 0.5 + 1 + 2 + 4 + 3.5) / 6)
    assert endpoint_error(PRED, GT).count == 7  # without valid only the inf pixel drops


@pytest.mark.parametrize(("threshold", "expected"), [(0.5, 4), (1.0, 3), (2.0, 2), (4.0, 0),
                                                      (3.0, 2)])
def test_bad_pixels_is_strictly_greater(threshold: float, expected: int) -> None:
    score = bad_pixels(PRED, GT, VALID, threshold)
    assert score.value == pytest.approx(100.0 * expected / 6)


def test_d1_needs_both_absolute_and_relative_error() -> None:
    # errors 4 (gt 100: 4% -> not outlier), 3.5 (gt 50: 7% -> outlier); 3.0 exactly is not > 3
    assert d1(PRED, GT, VALID).value == pytest.approx(100.0 / 6)
    gt = np.array([[10.0, 10.0, 100.0]])
    pred = np.array([[13.0, 13.01, 106.0]])
    assert d1(pred, gt).value == pytest.approx(100.0 * 2 / 3)


def test_empty_mask_gives_nan_and_zero_count() -> None:
    score = endpoint_error(PRED, GT, np.zeros_like(VALID))
    assert score.count == 0 and math.isnan(score.value)


def test_nan_prediction_propagates() -> None:
    pred = PRED.copy()
    pred[0, 0] = np.nan
    assert math.isnan(endpoint_error(pred, GT, VALID).value)
    # a NaN error fails every "> t" comparison: counted, it would pass as a good pixel
    for score in (bad_pixels(pred, GT, VALID, 1.0), d1(pred, GT, VALID)):
        assert score.count == 6 and math.isnan(score.value)
    at_unknown = np.where(np.isinf(GT), np.nan, PRED)  # not evaluated: no effect
    assert bad_pixels(at_unknown, GT, VALID, 1.0) == bad_pixels(PRED, GT, VALID, 1.0)


def test_shape_errors_name_the_arrays() -> None:
    with pytest.raises(ValueError, match=r"prediction\.shape"):
        endpoint_error(PRED[:, :2], GT)
    with pytest.raises(ValueError, match=r"valid\.shape"):
        d1(PRED, GT, VALID[:, :2])


# holes at gt 10 (NaN), gt 100 (+inf) and gt 0.5 (-inf); one exact pixel; one unknown gt
HOLE_GT = np.array([[10.0, 100.0, 0.5, 20.0, np.nan]])
HOLE_PRED = np.array([[np.nan, np.inf, -np.inf, 20.0, np.nan]])


@pytest.mark.parametrize(("metric", "expected"), [
    (lambda p, g: endpoint_error(p, g, count_holes=True), (10 + 100 + 0.5 + 0) / 4),  # |gt|
    (lambda p, g: bad_pixels(p, g, None, 1.0, count_holes=True), 75.0),  # even at gt 0.5
    (lambda p, g: bad_pixels(p, g, None, 200.0, count_holes=True), 75.0),  # at any threshold
    (lambda p, g: d1(p, g, count_holes=True), 75.0),
])
def test_holes_count_as_errors(metric, expected: float) -> None:
    score = metric(HOLE_PRED, HOLE_GT)
    assert score.count == 4 and score.value == pytest.approx(expected)


def test_hole_rule_leaves_finite_predictions_alone() -> None:
    for count_holes in (False, True):
        assert endpoint_error(PRED, GT, VALID, count_holes=count_holes) == endpoint_error(
            PRED, GT, VALID)
        assert bad_pixels(PRED, GT, VALID, 2.0, count_holes=count_holes) == bad_pixels(
            PRED, GT, VALID, 2.0)


def test_registered_holes_metrics_count_holes_others_propagate() -> None:
    sample = {"disparity": np.nan_to_num(HOLE_GT), "valid": np.isfinite(HOLE_GT)}
    with_holes, plain = get_metrics("stereo", ["epe_holes", "epe"])
    assert with_holes.fn(HOLE_PRED, sample).value == pytest.approx(110.5 / 4)
    assert math.isnan(plain.fn(HOLE_PRED, sample).value)
