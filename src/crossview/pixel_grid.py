"""Pixel coordinates to ``grid_sample`` coordinates, by the published formula.

With ``align_corners=True`` pixel ``p`` of an axis of ``n`` pixels sits at ``2 * p / (n - 1) - 1``.
The order of operations is part of the contract: the published MatchAttention code multiplies
first and divides second, and ``p * (2 / (n - 1)) - 1`` differs from it by one ulp for some
integers (``p = 3, n = 6``: ``0.20000000000000018`` against ``0.19999999999999996``), and
``grid_sample``, which maps ``g`` back to ``(g + 1) / 2 * (n - 1)``, then reads pixel
``3.0000000000000004`` instead of ``3.0`` and blends ~4e-16 of the next one. That is enough to
move a consistency error that should be exactly the non-occlusion threshold across it. Every grid
crossview builds goes through this one function.

Example:
    >>> g = to_grid_coords(3.0, 6)
    >>> (g + 1) / 2 * (6 - 1)
    3.0
"""

from __future__ import annotations

from typing import TypeVar

import numpy as np
import torch

Coords = TypeVar("Coords", float, np.ndarray, torch.Tensor)


def to_grid_coords(p: Coords, n: int) -> Coords:
    """``2 * p / (n - 1) - 1``: pixel coordinates ``p`` (any shape) on an axis of ``n`` pixels in
    ``grid_sample``'s ``align_corners=True`` range ``[-1, 1]``.

    A one-pixel axis (``n = 1``) maps every position to ``2 * p - 1``; ``grid_sample`` with
    ``align_corners=True`` reads its one pixel wherever the coordinate lies.
    """
    if n < 1:
        raise ValueError(f"an axis needs at least one pixel, got {n=}")
    return 2 * p / max(n - 1, 1) - 1
