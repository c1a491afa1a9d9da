from __future__ import annotations

import math

import numpy as np
import pytest

from crossview.errors import UserError
from crossview.metrics import MetricAccumulator, Score, get_metrics, list_metrics


def test_score_adds_and_divides() -> None:
    assert (Score(3.0, 2) + Score(1.0, 2)).value == 1.0
    assert math.isnan(Score(0.0, 0).value)


def test_accumulator_pooled_versus_image_mean() -> None:
    acc = MetricAccumulator(get_metrics("stereo", ["epe", "bad1"]))
    big = {"disparity": np.zeros((1, 3)), "valid": np.ones((1, 3), bool)}
    small = {"disparity": np.zeros((1, 1)), "valid": np.ones((1, 1), bool)}
    assert acc.update(np.full((1, 3), 1.0), big, "a") == {"epe": 1.0, "bad1": 0.0}
    acc.update(np.full((1, 1), 5.0), small, "b")
    summary = acc.summary()
    assert summary["epe"]["pooled"] == pytest.approx((3 * 1 + 5) / 4)
    assert summary["epe"]["image_mean"] == pytest.approx((1 + 5) / 2)
    assert summary["bad1"]["pooled"] == pytest.approx(25.0)
    assert [name for name, _ in acc.rows] == ["a", "b"]
    assert acc.totals()["epe"] == Score(8.0, 4)


def test_image_mean_skips_images_without_evaluated_pixels() -> None:
    acc = MetricAccumulator(get_metrics("stereo", ["epe"]))
    acc.update(np.ones((1, 1)), {"disparity": np.zeros((1, 1)), "valid": np.ones((1, 1), bool)})
    acc.update(np.ones((1, 1)), {"disparity": np.zeros((1, 1)), "valid": np.zeros((1, 1), bool)})
    assert acc.summary()["epe"]["image_mean"] == 1.0


def test_noc_metrics_use_the_noc_mask_and_need_it() -> None:
    (metric,) = get_metrics("flow", ["epe_noc"])
    sample = {"flow": np.zeros((1, 2, 2)), "valid": np.ones((1, 2), bool),
              "valid_noc": np.array([[True, False]])}
    assert metric.fn(np.array([[[1.0, 0.0], [9.0, 0.0]]]), sample) == Score(1.0, 1)
    with pytest.raises(UserError, match="valid_noc"):
        metric.fn(np.zeros((1, 2, 2)), {"flow": np.zeros((1, 2, 2)), "valid": None})


def test_unknown_metric_names_the_known_ones() -> None:
    with pytest.raises(UserError, match="d1_all"):
        get_metrics("stereo", ["d2"])
    assert "fl_all" in list_metrics("flow")


def test_sample_scores_added_back_reproduce_rows_and_summary() -> None:
    rng = np.random.default_rng(0)
    acc = MetricAccumulator(get_metrics("stereo", ["epe", "bad1"]))
    for i in range(4):
        truth = rng.uniform(0, 9, (2, 3 + i))
        acc.update(truth + rng.normal(0, 2, truth.shape),
                   {"disparity": truth, "valid": rng.random(truth.shape) < 0.7}, f"s{i}")
    copy = MetricAccumulator(acc.metrics)
    for (name, _), scores in zip(acc.rows, acc.sample_scores(), strict=True):
        copy.add(scores, name)
    assert copy.rows == acc.rows and copy.summary() == acc.summary()
