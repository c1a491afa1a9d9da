"""Benchmark metrics with exact, documented definitions (see each function's docstring).

- :mod:`crossview.metrics.stereo`: EPE / avgerr, bad-N, KITTI D1;
- :mod:`crossview.metrics.flow`: flow EPE, N-px accuracy, outliers, KITTI Fl;
- :mod:`crossview.metrics.score`: :class:`Score` per sample and :class:`MetricAccumulator`, which
  reduces over a dataset per pixel ("pooled") and per image ("image_mean");
- :mod:`crossview.metrics.keypoints`: PCK of semantic keypoint transfer;
- :mod:`crossview.metrics.sparsification`: sparsification curves and AUC of a confidence;
- :mod:`crossview.metrics.registry`: named metrics (``"d1_all"``, ``"bad2_noc"``, ``"fl_all"``,
  ``"pck@0.1_bbox"``, ...); importing this package registers them all.
"""

from __future__ import annotations

from crossview.metrics.flow import (
    fl_all,
    flow_accuracy,
    flow_endpoint_error,
    flow_errors,
    flow_outliers,
)
from crossview.metrics.keypoints import pck
from crossview.metrics.registry import get_metrics, list_metrics, register_metric
from crossview.metrics.score import REDUCTIONS, MetricAccumulator, MetricSpec, Score
from crossview.metrics.stereo import bad_pixels, d1, disparity_errors, endpoint_error

__all__ = [
    "REDUCTIONS",
    "MetricAccumulator",
    "MetricSpec",
    "Score",
    "bad_pixels",
    "d1",
    "disparity_errors",
    "endpoint_error",
    "fl_all",
    "flow_accuracy",
    "flow_endpoint_error",
    "flow_errors",
    "flow_outliers",
    "get_metrics",
    "list_metrics",
    "pck",
    "register_metric",
]
