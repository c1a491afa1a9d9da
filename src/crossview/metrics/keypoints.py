"""PCK: the percentage of correct keypoints of semantic correspondence (TransforMatcher Eq. 13).

A transferred keypoint is correct when ``||k_pred - k_gt||_2 <= alpha * max(H, W)`` where
``(H, W)`` is the size of a reference box in the *target* image:

- ``"img"``: the whole target image;
- ``"bbox"``: the annotated object bounding box ``(x0, y0, x1, y1)`` of the target;
- ``"bbox-kp"``: the extent of the target keypoints, taken over the **valid** keypoints only
  (PF-WILLOW practice). A widely copied evaluation pads missing keypoints with -2 before taking
  the extent, which enlarges the box and inflates the score; that is not done here.

Keypoints are ``[N, 2]`` pixel ``(x, y)`` arrays with a boolean ``valid [N]``. Each call returns
a :class:`~crossview.metrics.score.Score` ``(100 * correct, valid count)`` of one pair, so the
accumulator gives both the per-keypoint ("pooled") and the per-pair ("image_mean") PCK.
The metrics ``pck@{alpha}_{kind}`` of task ``"semantic"`` are registered by this module (found by
:mod:`crossview.metrics.registry`); they read ``keypoints1``, ``valid_keypoints``, ``bbox1``
and ``image1`` from a sample.
"""

from __future__ import annotations

from collections.abc import Mapping
from functools import partial
from typing import Any

import numpy as np

from crossview.errors import UserError
from crossview.metrics.registry import list_metrics, register_metric
from crossview.metrics.score import MetricSpec, Score

THRESHOLD_KINDS = ("img", "bbox", "bbox-kp")


def pck_reference_size(kind: str, *, image_size: tuple[int, int] | None = None,
                       bbox: np.ndarray | None = None, keypoints: np.ndarray | None = None,
                       valid: np.ndarray | None = None) -> float:
    """``max(H, W)`` of the reference box of ``kind``.

    ``image_size`` is the target ``(H, W)``; ``bbox`` is ``(x0, y0, x1, y1)``; ``keypoints
    [N, 2]`` with ``valid [N]`` for ``"bbox-kp"``.
    """
    if kind == "img":
        if image_size is None:
            raise ValueError("the 'img' threshold needs image_size")
        return float(max(image_size))
    if kind == "bbox":
        if bbox is None:
            raise ValueError("the 'bbox' threshold needs bbox")
        box = np.asarray(bbox, np.float64)
        if box.shape != (4,):
            raise ValueError(f"bbox must be [4] (x0, y0, x1, y1), got {box.shape=}")
        x0, y0, x1, y1 = box
        return float(max(x1 - x0, y1 - y0))
    if kind == "bbox-kp":
        if keypoints is None:
            raise ValueError("the 'bbox-kp' threshold needs keypoints")
        points = np.asarray(keypoints, np.float64)
        if valid is not None:
            points = points[np.asarray(valid, bool)]
        if len(points) == 0:
            return float("nan")
        extent = points.max(axis=0) - points.min(axis=0)
        return float(extent.max())
    raise ValueError(f"threshold kind must be one of {THRESHOLD_KINDS}, got {kind!r}")


def pck(prediction: np.ndarray, ground_truth: np.ndarray, valid: np.ndarray | None,
        threshold: float) -> Score:
    """PCK of one pair: ``Score(100 * #correct, #valid)``; correct means distance <= threshold.

    ``prediction``, ``ground_truth``: ``[N, 2]`` pixel ``(x, y)``; ``valid``: ``[N]`` bool.
    """
    prediction = np.asarray(prediction, np.float64)
    ground_truth = np.asarray(ground_truth, np.float64)
    if prediction.shape != ground_truth.shape or prediction.ndim != 2 or prediction.shape[1] != 2:
        raise ValueError(f"keypoints must both be [N, 2]: {prediction.shape=}, "
                         f"{ground_truth.shape=}")
    mask = np.isfinite(ground_truth).all(axis=1)
    if valid is not None:
        valid = np.asarray(valid, bool)
        if valid.shape != mask.shape:
            raise ValueError(f"valid must be [N] like the keypoints: {valid.shape=}")
        mask &= valid
    distance = np.linalg.norm(prediction[mask] - ground_truth[mask], axis=1)
    return Score(100.0 * float(np.count_nonzero(distance <= threshold)), int(mask.sum()))


def sample_pck(prediction: np.ndarray, sample: Mapping[str, Any], alpha: float,
               kind: str) -> Score:
    """PCK@``alpha`` with threshold ``kind`` for one semantic sample dict: ``prediction`` are
    the transferred keypoints ``[N, 2]`` (x, y) in the target image, compared with
    ``sample["keypoints1"] [N, 2]`` where ``sample["valid_keypoints"] [N]``."""
    valid = sample.get("valid_keypoints")
    if kind == "bbox" and sample.get("bbox1") is None:
        raise UserError("this dataset has no target bounding boxes for a 'bbox' PCK")
    size = pck_reference_size(kind, image_size=sample["image1"].shape[:2],
                              bbox=sample.get("bbox1"), keypoints=sample["keypoints1"],
                              valid=valid)
    return pck(prediction, sample["keypoints1"], valid, alpha * size)


def _register() -> None:
    if list_metrics("semantic"):
        return
    for kind in THRESHOLD_KINDS:
        for alpha in (0.05, 0.1, 0.15):
            register_metric(MetricSpec(
                f"pck@{alpha:g}_{kind}", "semantic", partial(sample_pck, alpha=alpha, kind=kind),
                f"% keypoints within {alpha:g} * max side of the target {kind} box", "%"))


_register()
