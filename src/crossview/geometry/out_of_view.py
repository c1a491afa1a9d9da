"""The strip of a left view that the right camera does not see, continued from the surface
beside it.

A left-view pixel ``x`` with disparity ``d`` has its match at ``x - d``; where that lies left
of the right image (``x - d < 0``, a strip along the left border as wide as the disparity) the
pixel cannot be matched, and a fill gives it the value of the nearest matched pixel of its row:
a constant, wrong on every slanted surface (floors, walls, tables) that runs out of the image.
Here each row's strip ends at its last unmatched column ``s``; from ``x0 = s + 1`` the row's
slope is the median of ``(d(x0 + k) - d(x0)) / k`` over the spans ``k = span / 2, span,
2 span``; as one row's slope is noisy and surfaces are smooth across rows, the slopes are
median-filtered over ``2 rows + 1`` rows; the strip then takes ``d(x0) + slope (x - x0)``, at
least 0 (a plane continued, as the out-of-view pixels of a planar scene are exactly).
"""

from __future__ import annotations

import numpy as np


def out_of_view_strip_end(disparity: np.ndarray) -> np.ndarray:
    """Per row the first column after the last pixel whose match ``x - d`` lies left of the
    image (0 for a row without one): ``disparity [H, W]`` -> ``[H]`` int."""
    if disparity.ndim != 2:
        raise ValueError(f"disparity must be [H, W], got {disparity.shape}")
    width = disparity.shape[1]
    outside = np.arange(width) - disparity < 0
    last = width - 1 - np.argmax(outside[:, ::-1], axis=1)
    return np.where(outside.any(axis=1), np.minimum(last + 1, width - 1), 0)


def extend_out_of_view(disparity: np.ndarray, span: int, rows: int) -> np.ndarray:
    """The left view's out-of-view strip continued linearly (module docstring).

    Args:
        disparity: the left view's disparity ``[H, W]`` (px, finite).
        span: the middle span ``k`` (px) of the row slopes.
        rows: the slopes are median-filtered over ``2 rows + 1`` rows.

    Returns:
        ``[H, W]``, ``disparity``'s dtype; equal to ``disparity`` right of each row's strip.
    """
    if span < 2 or rows < 0:
        raise ValueError(f"need span >= 2 and rows >= 0, got {span=}, {rows=}")
    height, width = disparity.shape[0], disparity.shape[-1]
    start = out_of_view_strip_end(disparity)
    at = np.arange(height)
    value = disparity[at, start]
    slopes = []
    for k in (span // 2, span, 2 * span):
        end = np.minimum(start + k, width - 1)
        slopes.append((disparity[at, end] - value) / np.maximum(end - start, 1))
    slope = _running_median(np.median(slopes, axis=0), rows)
    columns = np.arange(width)[None]
    line = value[:, None] + slope[:, None] * (columns - start[:, None])
    inside_strip = columns < start[:, None]
    return np.where(inside_strip, np.maximum(line, 0.0), disparity).astype(disparity.dtype)


def _running_median(values: np.ndarray, radius: int) -> np.ndarray:
    """The median of each window of ``2 radius + 1`` values of ``values [N]`` about each one,
    the end values repeated beyond the ends: ``[N]``, ``values``' dtype.

    >>> _running_median(np.array([1.0, 9.0, 2.0, 3.0]), 1).tolist()
    [1.0, 2.0, 3.0, 3.0]
    """
    padded = np.pad(values, radius, mode="edge")
    windows = np.lib.stride_tricks.sliding_window_view(padded, 2 * radius + 1)
    return np.median(windows, axis=-1).astype(values.dtype)
