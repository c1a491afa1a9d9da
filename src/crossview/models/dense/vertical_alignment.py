"""A stereo pair's rows lined up before matching.

A rectified pair's matches lie on the same row. Photographs from a rig that is slightly off, or
whose rectification is, hold a vertical offset between the views, which both halves of the fused
default pay for: SGBM searches along the row only and the network was trained on rectified pairs
(docs/results/real-stereo/real_vertical_offset.py measures it on real scenes). :func:`measure_rows`
measures the offset as the median vertical component of OpenCV DIS's flow from the left image to
the right at the pixels whose forward-backward error is below :data:`CONSISTENT_PX`. DIS alone
misses offsets that are large for the image (20 rows of a 128-row pair of fine texture), so
the rows' mean brightness profiles, which a horizontal disparity hardly changes, are first
cross-correlated for a whole-row offset (:func:`profile_offset`); DIS then measures what is
left, and of the two measurements the one with more consistent matches is kept.
:func:`rows_shifted` moves images or fields along y with bilinear interpolation. The offset is
one number per pair: a rotation or a scale difference between the views is not modelled.
Numpy and OpenCV only (no torch): :mod:`crossview.runtime` lines rows up with these functions
too.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import NamedTuple

import numpy as np

from crossview.geometry.consistency_arrays import consistency_error
from crossview.models.dense.classical import dis_flow, grey_image, require_cv2

OFFSET_PIXELS = 250_000  # the offset is measured on the pair shrunk to at most this many pixels
CONSISTENT_PX = 0.5  # forward-backward error (L1, px at the measuring size) of a counted match
# the brightness profiles are compared over offsets up to this share of the height
MAX_PROFILE_SHARE = 0.25
MIN_SIDE = 16  # px: OpenCV's DIS refuses (or crashes on) images smaller than about 12 px
# a row offset a run lines up and says so (rectified pairs: < 0.3 px); also the tolerance of
# the swapped-pair check on the measure's disparities
NOTED_OFFSET_PX = 0.5


# fields [2, H, W, 2] -> (forward-backward error [2, H, W], inside [2, H, W])
Consistency = Callable[[np.ndarray], tuple[np.ndarray, np.ndarray]]


class RowMeasure(NamedTuple):
    """What :func:`measure_rows` tells of a pair: the right image's rows' ``offset`` (px) and
    the ``disparities [N]`` (px, ``x_left - x_right``) of the consistent matches it counted."""

    offset: float
    disparities: np.ndarray


def measure_rows(left: np.ndarray, right: np.ndarray, *,
                 consistency: Consistency = consistency_error) -> RowMeasure:
    """The vertical offset (px) of the right image's rows against the left's: a left pixel
    ``(x, y)`` matches the right pixel ``(x - d, y + offset)``; RGB uint8 ``[H, W, 3]`` images
    of one size. Offset 0.0 and no disparities when no match passes the forward-backward check
    or the pair (at the measuring size) is less than :data:`MIN_SIDE` px high or wide.
    ``consistency``: the forward-backward check's rule
    (:func:`crossview.geometry.consistency_arrays.consistency_error`, or a faster one that
    computes the same, as torch's :func:`crossview.geometry.consistency.consistency_error`)."""
    h, w = left.shape[:2]
    factor = min(1.0, math.sqrt(OFFSET_PIXELS / (h * w)))
    if factor < 1:
        opencv = require_cv2("the vertical offset of a stereo pair")
        size = (max(1, round(w * factor)), max(1, round(h * factor)))
        left, right = (opencv.resize(np.ascontiguousarray(image), size,
                                     interpolation=opencv.INTER_AREA) for image in (left, right))
    left, right = grey_image(left), grey_image(right)
    if min(left.shape) < MIN_SIDE:
        return RowMeasure(0.0, np.zeros(0, np.float32))
    coarse = profile_offset(left, right)
    measures = [_measure_dis(left, right, 0, consistency)]
    if abs(coarse - measures[0][0]) >= 1:
        measures.append(_measure_dis(left, right, coarse, consistency))
    offset, disparities, _ = max(measures, key=lambda measure: measure[2])
    return RowMeasure(offset / factor, disparities / factor)


def _measure_dis(left: np.ndarray, right: np.ndarray, whole_rows: int,
                 consistency: Consistency) -> tuple[float, np.ndarray, int]:
    """``(offset, disparities, count)`` of DIS's consistent matches (by ``consistency``)
    between grey ``left`` and ``right`` read ``whole_rows`` further down (edge rows repeated),
    the offset including ``whole_rows``."""
    rows = np.clip(np.arange(right.shape[0]) + whole_rows, 0, right.shape[0] - 1)
    right = np.ascontiguousarray(right[rows])
    flows = np.stack([dis_flow(left, right), dis_flow(right, left)])
    error, inside = consistency(flows)
    counted = (error[0] < CONSISTENT_PX) & inside[0]
    if not counted.any():
        return 0.0, np.zeros(0, np.float32), 0
    return (lower_median(flows[0, ..., 1][counted]) + whole_rows,
            -flows[0, ..., 0][counted], int(counted.sum()))


def lower_median(values: np.ndarray) -> float:
    """The median of ``values [N]`` (N >= 1), the lower of the two middle values when ``N``
    is even (one of the values, as ``torch.median`` takes it).

    >>> lower_median(np.array([4.0, 1.0, 3.0, 2.0]))
    2.0
    """
    middle = (len(values) - 1) // 2
    return float(np.partition(values, middle)[middle])


def profile_offset(left: np.ndarray, right: np.ndarray) -> int:
    """The whole-row offset (as :func:`measure_rows`'s) that best lines up the two grey
    ``[H, W]`` images' row profiles (their rows' mean brightness, differentiated so that an
    exposure difference does not count): the highest normalised cross-correlation over offsets
    up to :data:`MAX_PROFILE_SHARE` of the height. 0 for images of fewer than 8 rows."""
    first, second = (np.diff(image.astype(np.float64).mean(axis=1)) for image in (left, right))
    n = len(first)
    if n < 7:
        return 0
    limit = max(1, int(MAX_PROFILE_SHARE * n))
    best, best_score = 0, -np.inf
    for shift in range(-limit, limit + 1):  # second[y + shift] against first[y]
        a = first[max(0, -shift): n - max(0, shift)]
        b = second[max(0, shift): n + min(0, shift)]
        a, b = a - a.mean(), b - b.mean()
        norm = math.sqrt(float(a @ a) * float(b @ b))
        score = float(a @ b) / norm if norm > 0 else -np.inf
        if score > best_score:
            best, best_score = shift, score
    return best


def rows_shifted(x: np.ndarray, by: np.ndarray) -> np.ndarray:
    """``x [N, C, H, W]`` (float) sampled ``by [N]`` rows further down (``out[..., y, :] =
    x[..., y + by, :]``), linear between rows, the first and last rows repeated beyond the
    border (exact for whole rows); same dtype as ``x``.

    >>> rows_shifted(np.arange(4.0).reshape(1, 1, 4, 1), np.array([0.5]))[0, 0, :, 0].tolist()
    [0.5, 1.5, 2.5, 3.0]
    """
    if x.ndim != 4 or by.shape != (x.shape[0],):
        raise ValueError(f"need x [N, C, H, W] and one offset per image, got {x.shape=}, "
                         f"{by.shape=}")
    h = x.shape[2]
    rows = np.clip(np.arange(h, dtype=np.float64)[None] + by.astype(np.float64)[:, None],
                   0, h - 1)
    above = np.floor(rows).astype(np.intp)
    below = np.minimum(above + 1, h - 1)
    weight = (rows - above).astype(x.dtype)[:, :, None]  # [N, H, 1]
    out = np.empty(x.shape, x.dtype)
    for i, image in enumerate(x):  # [C, H, W], its rows picked
        out[i] = image[:, above[i]] * (1 - weight[i]) + image[:, below[i]] * weight[i]
    return out
