"""Optical-flow metrics, as the flow benchmarks define them.

All functions take ``prediction`` and ``ground_truth`` flow ``[H, W, 2]`` ((u, v) in pixels)
and an optional boolean ``valid [H, W]``. The evaluated pixels are ``valid`` (default: all)
and-ed with "both ground-truth components finite and at most 1e9 in magnitude" (the ``.flo``
convention for unknown flow). The end-point error of a pixel is the Euclidean distance
``||f - f_gt||_2``. Each function returns a :class:`Score` for one image; percentages are in
0..100. Predictions are taken as they are (NaN propagates), unless ``count_holes=True``, which
counts a missing or non-finite prediction as an error (see :mod:`crossview.metrics.score`).
"""

from __future__ import annotations

import numpy as np

from crossview.metrics.score import Score, hole_free_errors, mark_holes, percentage
from crossview.metrics.stereo import D1_ABSOLUTE_PX, D1_RELATIVE

UNKNOWN_FLOW = 1e9


def flow_errors(prediction: np.ndarray, ground_truth: np.ndarray,
                valid: np.ndarray | None = None, *, count_holes: bool = False
                ) -> tuple[np.ndarray, np.ndarray]:
    """Return ``(end-point error, ||f_gt||)``, each float64 ``[N]`` over the ``N`` evaluated
    pixels.

    ``prediction``, ``ground_truth``: flow ``[H, W, 2]``; ``valid``: bool ``[H, W]`` or None.
    ``count_holes``: a prediction with a non-finite component gets the error ``inf``
    (:func:`~crossview.metrics.score.mark_holes`) instead of NaN.
    """
    prediction = np.asarray(prediction, np.float64)
    ground_truth = np.asarray(ground_truth, np.float64)
    if prediction.shape != ground_truth.shape or prediction.ndim != 3 or prediction.shape[2] != 2:
        raise ValueError(f"flow maps must both be [H, W, 2]: {prediction.shape=}, "
                         f"{ground_truth.shape=}")
    mask = (np.isfinite(ground_truth) & (np.abs(ground_truth) <= UNKNOWN_FLOW)).all(axis=2)
    if valid is not None:
        valid = np.asarray(valid)
        if valid.shape != ground_truth.shape[:2]:
            raise ValueError(f"valid must be [H, W] of the flow: {valid.shape=}")
        mask &= valid.astype(bool)
    errors = np.linalg.norm(prediction[mask] - ground_truth[mask], axis=-1)
    magnitude = np.linalg.norm(ground_truth[mask], axis=-1)
    return (mark_holes(errors) if count_holes else errors), magnitude


def flow_endpoint_error(prediction: np.ndarray, ground_truth: np.ndarray,
                        valid: np.ndarray | None = None, *, count_holes: bool = False) -> Score:
    """Flow EPE: mean of ``||f - f_gt||_2`` over the evaluated pixels (flows ``[H, W, 2]``,
    ``valid`` bool ``[H, W]``); with ``count_holes`` a hole's error is ``||f_gt||``."""
    errors, magnitude = flow_errors(prediction, ground_truth, valid, count_holes=count_holes)
    if count_holes:
        errors = hole_free_errors(errors, magnitude)
    return Score(float(errors.sum()), errors.size)


def flow_accuracy(prediction: np.ndarray, ground_truth: np.ndarray, valid: np.ndarray | None,
                  threshold: float, *, count_holes: bool = False) -> Score:
    """N-px accuracy: percentage of evaluated pixels with ``||f - f_gt||_2 < threshold``
    (strictly less; RAFT's "1px", "3px", "5px"); flows ``[H, W, 2]``, ``valid`` ``[H, W]``;
    with ``count_holes`` a hole is never accurate."""
    errors, _ = flow_errors(prediction, ground_truth, valid, count_holes=count_holes)
    return percentage(errors < threshold, errors)


def flow_outliers(prediction: np.ndarray, ground_truth: np.ndarray, valid: np.ndarray | None,
                  threshold: float, *, count_holes: bool = False) -> Score:
    """Percentage of evaluated pixels with ``||f - f_gt||_2 > threshold`` (strictly; KITTI
    2012 "Out" uses 3 px); flows ``[H, W, 2]``, ``valid`` bool ``[H, W]``; with
    ``count_holes`` a hole is an outlier."""
    errors, _ = flow_errors(prediction, ground_truth, valid, count_holes=count_holes)
    return percentage(errors > threshold, errors)


def fl_all(prediction: np.ndarray, ground_truth: np.ndarray,
           valid: np.ndarray | None = None, *, count_holes: bool = False) -> Score:
    """KITTI 2015 Fl: percentage of evaluated pixels whose flow is an outlier (flows
    ``[H, W, 2]``, ``valid`` bool ``[H, W]``).

    A pixel is an outlier when ``||f - f_gt||_2 > 3`` px **and** ``> 0.05 * ||f_gt||_2`` (both
    strict). "Fl-all" evaluates all pixels with ground truth (``flow_occ``), "Fl-noc" only the
    non-occluded ones (``flow_noc``). With ``count_holes`` a hole is an outlier.
    """
    errors, magnitude = flow_errors(prediction, ground_truth, valid, count_holes=count_holes)
    outliers = (errors > D1_ABSOLUTE_PX) & (errors > D1_RELATIVE * magnitude)
    return percentage(outliers, errors)
