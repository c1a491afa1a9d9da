"""Disparity from a relative-position field: the sign rule of rectified stereo.

A stereo model's field ``[B, H, W, 2]`` holds, per pixel, where its match lies in the other view
(x, y px). In a rectified pair the left view's match lies to the left (x <= 0) and the right
view's to the right (x >= 0), so the positive disparity is ``-x`` on the left view and ``x`` on
the right; a match on the wrong side (a wrong estimate) counts as disparity 0.
"""

from __future__ import annotations

from typing import TypeVar

import numpy as np
import torch

Array = TypeVar("Array", torch.Tensor, np.ndarray)


def field_to_disparity(field: Array, view: str = "left") -> Array:
    """Positive disparity ``[..., H, W]`` of the ``view`` (``"left"`` or ``"right"``) whose
    field ``[..., H, W, 2]`` is given, clipped at 0; tensors and numpy arrays alike.

    >>> field_to_disparity(torch.tensor([[[-3.0, 0.0], [1.0, 0.0]]]))
    tensor([[3., 0.]])
    >>> field_to_disparity(torch.tensor([[[-3.0, 0.0], [1.0, 0.0]]]), "right")
    tensor([[0., 1.]])
    """
    if view not in ("left", "right"):
        raise ValueError(f"view must be 'left' or 'right', got {view!r}")
    x = field[..., 0]
    return (-x if view == "left" else x).clip(min=0)


def right_view_disparity(disparity: np.ndarray, valid: np.ndarray
                         ) -> tuple[np.ndarray, np.ndarray]:
    """The right view's disparity from the left view's, by forward warping with a z-buffer.

    Each known left pixel ``(x, y)`` of disparity ``d`` lands on the right pixels
    ``floor(x - d)`` and ``ceil(x - d)`` of row ``y`` (both, so that a surface stretched by
    the change of view leaves no one-pixel cracks); where several land on one pixel the
    largest disparity (the nearest surface) wins, as it occludes the others. Right pixels no
    left pixel lands on (occluded in the left view, or with unknown ground truth) are unknown.

    Args:
        disparity: ``[H, W]`` positive left disparity in pixels (left ``(x, y)`` matches right
            ``(x - d, y)``).
        valid: ``[H, W]`` bool, where ``disparity`` is known.

    Returns:
        ``(disparity1 [H, W] float32, 0 where unknown; valid1 [H, W] bool)``.

    >>> d1, v1 = right_view_disparity(np.array([[0.0, 0.0, 2.0, 2.0]]), np.ones((1, 4), bool))
    >>> d1.tolist(), v1.tolist()
    ([[2.0, 2.0, 0.0, 0.0]], [[True, True, False, False]])
    """
    if disparity.ndim != 2 or disparity.shape != valid.shape:
        raise ValueError(f"disparity and valid must both be [H, W]; got {disparity.shape=}, "
                         f"{valid.shape=}")
    h, w = disparity.shape
    ys, xs = np.nonzero(valid)
    values = disparity[ys, xs].astype(np.float32)
    best = np.full(h * w, -np.inf, np.float32)
    for target in (np.floor(xs - values), np.ceil(xs - values)):
        inside = (target >= 0) & (target < w)
        flat = ys[inside] * w + target[inside].astype(np.int64)
        np.maximum.at(best, flat, values[inside])
    best = best.reshape(h, w)
    valid1 = np.isfinite(best)
    return np.where(valid1, best, 0.0).astype(np.float32), valid1
