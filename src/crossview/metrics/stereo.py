"""Disparity metrics, as the stereo benchmarks define them.

All functions take ``prediction`` and ``ground_truth`` disparity ``[H, W]`` (positive pixels)
and an optional boolean ``valid [H, W]``. The evaluated pixels are ``valid & isfinite(gt)``
(``valid`` defaults to all pixels): Middlebury and ETH3D mark unknown ground truth with inf,
KITTI with 0 in the file, which :func:`crossview.data.io.read_kitti_disparity` turns into
``valid = False``. Predictions are taken as they are: a NaN prediction at an evaluated pixel
makes the result NaN rather than being skipped, unless ``count_holes=True``, which counts it as
an error (see :mod:`crossview.metrics.score`). Each returns a :class:`Score` for one image;
percentages are in 0..100.

Benchmark names: Middlebury "avgerr" is :func:`endpoint_error`, Middlebury "bad 0.5/1/2/4"
and ETH3D "bad 1.0" are :func:`bad_pixels`, each on the "all" mask (known ground truth) or the
"nonocc" mask (``mask0nocc.png == 255``); KITTI 2015 "D1" is :func:`d1`.
"""

from __future__ import annotations

import numpy as np

from crossview.metrics.score import Score, hole_free_errors, mark_holes, percentage

D1_ABSOLUTE_PX = 3.0
D1_RELATIVE = 0.05


def disparity_errors(prediction: np.ndarray, ground_truth: np.ndarray,
                     valid: np.ndarray | None = None, *, count_holes: bool = False
                     ) -> tuple[np.ndarray, np.ndarray]:
    """Return ``(|prediction - gt|, gt)``, each float64 ``[N]`` over the ``N`` evaluated pixels.

    ``prediction``, ``ground_truth``: disparity ``[H, W]``; ``valid``: bool ``[H, W]`` or None.
    ``count_holes``: a non-finite prediction gets the error ``inf``
    (:func:`~crossview.metrics.score.mark_holes`) instead of NaN.
    """
    prediction = np.asarray(prediction, np.float64)
    ground_truth = np.asarray(ground_truth, np.float64)
    if prediction.shape != ground_truth.shape or prediction.ndim != 2:
        raise ValueError(
            f"disparity maps must both be [H, W]: {prediction.shape=}, {ground_truth.shape=}"
        )
    mask = np.isfinite(ground_truth)
    if valid is not None:
        valid = np.asarray(valid)
        if valid.shape != ground_truth.shape:
            raise ValueError(f"valid must be [H, W] like the disparity: {valid.shape=}")
        mask &= valid.astype(bool)
    errors = np.abs(prediction[mask] - ground_truth[mask])
    return (mark_holes(errors) if count_holes else errors), ground_truth[mask]


def endpoint_error(prediction: np.ndarray, ground_truth: np.ndarray,
                   valid: np.ndarray | None = None, *, count_holes: bool = False) -> Score:
    """EPE (Middlebury "avgerr"): mean of ``|d - d_gt|`` over the evaluated pixels (disparities
    ``[H, W]``, ``valid`` bool ``[H, W]``); with ``count_holes`` a hole's error is ``|d_gt|``."""
    errors, truth = disparity_errors(prediction, ground_truth, valid, count_holes=count_holes)
    if count_holes:
        errors = hole_free_errors(errors, np.abs(truth))
    return Score(float(errors.sum()), errors.size)


def bad_pixels(prediction: np.ndarray, ground_truth: np.ndarray, valid: np.ndarray | None,
               threshold: float, *, count_holes: bool = False) -> Score:
    """bad-N: percentage of evaluated pixels with ``|d - d_gt| > threshold`` (strictly);
    disparities ``[H, W]``, ``valid`` bool ``[H, W]``; with ``count_holes`` a hole is bad."""
    errors, _ = disparity_errors(prediction, ground_truth, valid, count_holes=count_holes)
    return percentage(errors > threshold, errors)


def d1(prediction: np.ndarray, ground_truth: np.ndarray, valid: np.ndarray | None = None, *,
       count_holes: bool = False) -> Score:
    """KITTI D1: percentage of evaluated pixels whose error is an outlier (disparities
    ``[H, W]``, ``valid`` bool ``[H, W]``).

    A pixel is an outlier when ``|d - d_gt| > 3`` px **and** ``|d - d_gt| > 0.05 * |d_gt|``
    (both strict), as in the KITTI 2015 devkit. With ``count_holes`` a hole is an outlier.
    """
    errors, truth = disparity_errors(prediction, ground_truth, valid, count_holes=count_holes)
    outliers = (errors > D1_ABSOLUTE_PX) & (errors > D1_RELATIVE * np.abs(truth))
    return percentage(outliers, errors)
