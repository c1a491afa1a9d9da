"""Left-right (stereo) and forward-backward (flow) consistency of two-view fields held as
numpy arrays, for the parts of crossview that run without torch (the classical fusion's glue,
the lining up of a pair's rows, :mod:`crossview.runtime`).

The rule is :mod:`crossview.geometry.consistency`'s: both views on the batch axis
(``[2B, H, W, 2]``, reference rows first), row ``i`` maps a pixel ``p`` to ``p + field[i, p]``
in the other view, whose field is row ``(i + B) mod 2B``, and the error is
``|field(p) + field_other(p + field(p))|_1``, the other field read bilinearly with zeros
outside the image. The arithmetic follows torch's CPU ``grid_sample`` step by step (pixel to
grid coordinate by :func:`crossview.pixel_grid.to_grid_coords`'s formula and back, the four
corner weights, the corners summed with fused multiply-adds, emulated in float64: the
float64 product of two float32 numbers is exact, so one rounding remains), so that on
a CPU whose torch kernels use FMA (AVX2, AVX-512, NEON) the error is bit-identical to
:func:`crossview.geometry.consistency.consistency_error`'s and a threshold cuts the same
pixels (tests/geometry/test_consistency_arrays.py).
"""

from __future__ import annotations

import numpy as np


def consistency_error(field: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Per pixel of ``field [2B, H, W, 2]`` (float32 px) its consistency error ``[2B, H, W]``
    float32 and whether its match falls inside the other view, ``inside [2B, H, W]`` bool
    (outside, the other field reads as 0, so the error is ``|field|_1``).

    >>> field = np.zeros((2, 1, 4, 2), np.float32)
    >>> field[0, ..., 0], field[1, ..., 0] = -1.0, 1.0  # disparity 1 in both views
    >>> error, inside = consistency_error(field)
    >>> error[0].tolist(), inside[0].tolist()
    ([[1.0, 0.0, 0.0, 0.0]], [[False, True, True, True]])
    """
    if field.ndim != 4 or field.shape[-1] != 2 or field.shape[0] % 2:
        raise ValueError(f"field must be both views' fields [2B, H, W, 2], got {field.shape=}")
    if field.dtype != np.float32:
        raise TypeError(f"field must be float32, got {field.dtype=}")
    n, h, w, _ = field.shape
    px = np.arange(w, dtype=np.float32) + field[..., 0]
    py = np.arange(h, dtype=np.float32)[:, None] + field[..., 1]
    aligned = min(h, w) > 1  # torch's backward_warp: align_corners=True unless an axis is 1 px
    x, y = _sampled_position(px, w, aligned), _sampled_position(py, h, aligned)
    left, top = np.floor(x), np.floor(y)
    east, south = x - left, y - top
    west, north = np.float32(1) - east, np.float32(1) - south
    # the other view's field, one flat table per component, with a border of two zero pixels:
    # a corner outside the image reads 0 there, as in grid_sample's zero padding, once the
    # position is clipped to at most a pixel beyond the border
    other = np.pad(np.roll(field, n // 2, axis=0), ((0, 0), (2, 2), (2, 2), (0, 0)))
    tables = [other[..., k].ravel() for k in (0, 1)]
    stride = w + 4
    first = (np.arange(n, dtype=np.int64) * ((h + 4) * stride))[:, None, None]
    corner = (first + (np.clip(top, -2, h).astype(np.int64) + 2) * stride
              + (np.clip(left, -2, w).astype(np.int64) + 2))
    sampled: list[np.ndarray] = []
    for step, weight in ((0, north * west), (1, north * east), (stride, south * west),
                         (stride + 1, south * east)):
        index = corner + step if step else corner
        for k, table in enumerate(tables):
            values = np.take(table, index)
            if len(sampled) < 2:  # onto 0, the fused multiply-add is the product rounded once
                sampled.append(values * weight)
            else:  # a fused multiply-add: the float64 product of float32 numbers is exact
                total = values.astype(np.float64)
                total *= weight
                total += sampled[k]
                sampled[k] = total.astype(np.float32)
    inside = (px >= 0) & (px <= w - 1) & (py >= 0) & (py <= h - 1)
    return (np.abs(field[..., 0] + sampled[0]) + np.abs(field[..., 1] + sampled[1])), inside


def noc_mask(field: np.ndarray, threshold: float) -> np.ndarray:
    """Non-occlusion (consistency) mask ``[2B, H, W]`` bool of ``field [2B, H, W, 2]``
    (float32 px): :func:`consistency_error` below ``threshold`` px."""
    return consistency_error(field)[0] < threshold


def _sampled_position(p: np.ndarray, n: int, aligned: bool) -> np.ndarray:
    """Where ``grid_sample`` reads pixel coordinates ``p`` (float32) of an axis of ``n``
    pixels, to the grid coordinate and back, rounded as torch rounds: with ``aligned``
    (``align_corners=True``) pixel centres at ``-1`` and ``1``, else (a pair with a one-pixel
    axis) pixel edges there, mapped back with a fused multiply-add."""
    one, half = np.float32(1), np.float32(n / 2)
    if aligned:
        grid = np.float32(2) * p / np.float32(n - 1) - one
        return (grid + one) * np.float32((n - 1) / 2)
    grid = (np.float32(2) * p + one) / np.float32(n) - one
    return (grid.astype(np.float64) * half + (half - np.float32(0.5))).astype(np.float32)
