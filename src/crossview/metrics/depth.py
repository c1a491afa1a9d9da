"""Depth metrics of the multi-view depth study: relative error and the δ < 1.25 accuracy.

Registered for task ``multiview-depth``: a prediction is the depth ``[H, W]`` of the sample's
reference view (view 0), compared with ``sample["depth"][0]`` on ``sample["valid"][0]``
(``[V, H, W]`` each). Both add up per pixel, so the ``pooled`` reduction weighs every pixel of
the dataset the same.

- ``abs_rel``: ``|d - d*| / d*`` (the "AbsRel" of depth benchmarks, a fraction);
- ``delta1``: percentage of pixels with ``max(d / d*, d* / d) < 1.25``.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

from crossview.metrics.registry import register_metric
from crossview.metrics.score import MetricSpec, Score, percentage

TASK = "multiview-depth"
DELTA = 1.25


def _reference(prediction: Any, sample: Mapping[str, Any]) -> tuple[np.ndarray, np.ndarray]:
    """Predicted and true depth ``[N]`` of the reference view's valid pixels."""
    pred = np.asarray(prediction, np.float64)
    truth = np.asarray(sample["depth"], np.float64)[0]
    if pred.shape != truth.shape:
        raise ValueError(f"the prediction must be the reference view's depth {truth.shape}, "
                         f"got {pred.shape=}")
    valid = np.asarray(sample["valid"], bool)[0]
    return pred[valid], truth[valid]


def abs_rel(prediction: Any, sample: Mapping[str, Any]) -> Score:
    """Sum of ``|d - d*| / d*`` over the valid pixels of view 0, and their count."""
    pred, truth = _reference(prediction, sample)
    return Score(float((np.abs(pred - truth) / truth).sum()), int(truth.size))


def delta1(prediction: Any, sample: Mapping[str, Any]) -> Score:
    """Percentage of valid pixels of view 0 whose depth ratio is below 1.25 (NaN fails)."""
    pred, truth = _reference(prediction, sample)
    with np.errstate(divide="ignore", invalid="ignore"):
        ratio = np.maximum(pred / truth, truth / pred)
    return percentage(ratio < DELTA, ratio)


ABS_REL = register_metric(MetricSpec("abs_rel", TASK, abs_rel,
                                     "mean relative depth error |d - d*| / d* of view 0"))
DELTA1 = register_metric(MetricSpec("delta1", TASK, delta1,
                                    "pixels of view 0 with depth ratio below 1.25", "%"))
