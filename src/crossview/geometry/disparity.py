"""Disparity from a relative-position field: the sign rule of rectified stereo.

A stereo model's field ``[B, H, W, 2]`` holds, per pixel, where its match lies in the other view
(x, y px). In a rectified pair the left view's match lies to the left (x <= 0) and the right
view's to the right (x >= 0), so the positive disparity is ``-x`` on the left view and ``x`` on
the right; a match on the wrong side (a wrong estimate) counts as disparity 0.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, TypeVar

import numpy as np

if TYPE_CHECKING:  # torch-free at run time: crossview.runtime uses this module
    import torch

Array = TypeVar("Array", "torch.Tensor", np.ndarray)


def field_to_disparity(field: Array, view: str = "left") -> Array:
    """Positive disparity ``[..., H, W]`` of the ``view`` (``"left"`` or ``"right"``) whose
    field ``[..., H, W, 2]`` is given, clipped at 0; tensors and numpy arrays alike.

    >>> import torch
    >>> field_to_disparity(torch.tensor([[[-3.0, 0.0], [1.0, 0.0]]]))
    tensor([[3., 0.]])
    >>> field_to_disparity(np.array([[[-3.0, 0.0], [1.0, 0.0]]]), "right")
    array([[0., 1.]])
    """
    if view not in ("left", "right"):
        raise ValueError(f"view must be 'left' or 'right', got {view!r}")
    x = field[..., 0]
    return (-x if view == "left" else x).clip(min=0)

