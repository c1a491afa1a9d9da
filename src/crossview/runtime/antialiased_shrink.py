"""Shrinking an image as torch's ``F.interpolate(mode="bilinear", antialias=True,
align_corners=False)`` does, in numpy: how ``crossview stereo`` takes a pair to its working size,
so that the runtime (no torch) takes it there the same way.

Each axis is resampled by a matrix: output pixel ``i`` of ``n`` (input ``N``, ``scale = N / n``)
is centred at input coordinate ``scale * (i + 0.5)`` and averages the input pixels within
``support = max(scale, 1)`` of it with triangle weights ``1 - |d| / support`` (``d``: distance of
a pixel's centre), normalised to sum to one; the window is the input pixels ``j`` with
``int(centre - support + 0.5) <= j < int(centre + support + 0.5)``, cut at the borders. At
``scale <= 1`` this is plain bilinear interpolation with half-pixel centres.

Example:
    >>> shrink_matrix(4, 2).round(4).tolist()  # halving: triangles two pixels wide each way
    [[0.4286, 0.4286, 0.1429, 0.0], [0.0, 0.1429, 0.4286, 0.4286]]
"""

from __future__ import annotations

import numpy as np


def shrink_matrix(size: int, out: int) -> np.ndarray:
    """The ``[out, size]`` float64 matrix that resamples an axis of ``size`` pixels to
    ``out`` (the module's weights; each row sums to one)."""
    if size < 1 or out < 1:
        raise ValueError(f"sizes must be positive, got {size} -> {out}")
    scale = size / out
    support = max(scale, 1.0)
    matrix = np.zeros((out, size))
    for i in range(out):
        centre = scale * (i + 0.5)
        first = max(int(centre - support + 0.5), 0)
        last = min(int(centre + support + 0.5), size)
        taps = np.arange(first, last)
        weights = np.clip(1 - np.abs((taps - centre + 0.5) / support), 0, None)
        matrix[i, first:last] = weights / weights.sum()
    return matrix


def antialiased_shrink(x: np.ndarray, size: tuple[int, int]) -> np.ndarray:
    """``x [B, C, H, W]`` (float) resampled to ``size = (h, w)`` as the module says; float32."""
    rows, columns = (shrink_matrix(n, m) for n, m in zip(x.shape[-2:], size, strict=True))
    out = np.einsum("hH,bcHW,wW->bchw", rows, x.astype(np.float64), columns, optimize=True)
    return out.astype(np.float32)
