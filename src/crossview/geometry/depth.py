"""Metric depth from rectified disparity, 3D points from depth, and depth-edge filtering.

Rectified stereo with focal length ``f`` (px), baseline ``B`` and principal points whose x
differ by ``doffs`` (px, right minus left; 0 for a pair rectified to one camera matrix) puts a
left pixel of disparity ``d`` at depth ``Z = f * B / (d + doffs)`` (units of ``B``). A pixel
``(u, v)`` at depth ``Z`` is the camera-frame point ``((u - cx) Z / f, (v - cy) Z / f, Z)``
(OpenCV axes: x right, y down, z forward; pixel centres at integer coordinates).

:func:`disparity_to_depth` and :func:`depth_to_points` take tensors or numpy arrays and give
back what they were given.
"""

from __future__ import annotations

import math
from typing import TypeVar

import numpy as np
import torch

Array = TypeVar("Array", torch.Tensor, np.ndarray)


def disparity_to_depth(disparity: Array, focal: float, baseline: float,
                       doffs: float = 0.0) -> Array:
    """Depth ``[..., H, W]`` (units of ``baseline``) of disparities ``[..., H, W]`` (px, a float
    tensor or numpy array; the depth is of the same kind): ``focal * baseline / (disparity +
    doffs)``, and 0 where ``disparity + doffs <= 0`` (no finite depth). ``focal`` and
    ``baseline`` must be positive and finite, ``doffs`` finite (``ValueError``; NaN would pass a
    plain ``<= 0`` test).

    >>> disparity_to_depth(torch.tensor([10.0, 0.0, 20.0]), focal=500.0, baseline=0.1)
    tensor([5.0000, 0.0000, 2.5000])
    >>> disparity_to_depth(np.array([10.0, 0.0]), focal=500.0, baseline=0.1)
    array([5., 0.])
    """
    if isinstance(disparity, np.ndarray):
        return disparity_to_depth(_tensor(disparity), focal, baseline, doffs).numpy()
    if not (_positive(focal) and _positive(baseline) and math.isfinite(doffs)):
        raise ValueError(f"focal and baseline must be positive and finite, doffs finite, got "
                         f"{focal=}, {baseline=}, {doffs=}")
    if not disparity.is_floating_point():
        raise TypeError(f"disparity must hold floats, got {disparity.dtype=}")
    shifted = disparity + doffs
    positive = shifted > 0
    return torch.where(positive, focal * baseline / torch.where(positive, shifted, 1.0), 0.0)


def depth_to_points(depth: Array, focal: float, cx: float, cy: float) -> Array:
    """Camera-frame points ``[..., H, W, 3]`` (x, y, z) of depths ``[..., H, W]`` (a tensor or
    numpy array; the points are of the same kind) seen by a pinhole camera of focal length
    ``focal`` (positive, finite) and principal point ``(cx, cy)`` (px, finite).

    >>> depth_to_points(torch.full((1, 2), 2.0), focal=2.0, cx=0.0, cy=0.0)[0, 1]
    tensor([1., 0., 2.])
    """
    if isinstance(depth, np.ndarray):
        return depth_to_points(_tensor(depth), focal, cx, cy).numpy()
    if not (_positive(focal) and math.isfinite(cx) and math.isfinite(cy)):
        raise ValueError(f"focal must be positive and finite, cx and cy finite, got {focal=}, "
                         f"{cx=}, {cy=}")
    if depth.ndim < 2:
        raise ValueError(f"depth must be [..., H, W], got {depth.shape=}")
    h, w = depth.shape[-2:]
    v, u = torch.meshgrid(torch.arange(h, dtype=depth.dtype, device=depth.device),
                          torch.arange(w, dtype=depth.dtype, device=depth.device), indexing="ij")
    return torch.stack([(u - cx) * depth / focal, (v - cy) * depth / focal, depth], dim=-1)


def _tensor(array: np.ndarray) -> torch.Tensor:
    # a copy: torch.from_numpy warns on read-only arrays (np.broadcast_to, np.frombuffer views)
    return torch.tensor(array)


def _positive(value: float) -> bool:
    return math.isfinite(value) and value > 0


def depth_edge_mask(depth: torch.Tensor, ratio: float) -> torch.Tensor:
    """Pixels ``[..., H, W]`` bool at a depth edge: some 4-neighbour's depth differs from the
    pixel's by more than ``ratio`` times the smaller of the two. Such pixels are where a
    disparity map blends foreground and background into "flying pixels" between the two
    surfaces; dropping them (both sides of the edge) keeps a point cloud's surfaces apart.

    >>> depth_edge_mask(torch.tensor([[1.0, 1.02, 2.0, 2.0]]), ratio=0.05)
    tensor([[False,  True,  True, False]])
    """
    if ratio <= 0:
        raise ValueError(f"ratio must be positive, got {ratio=}")
    edge = torch.zeros_like(depth, dtype=torch.bool)
    for dim in (-1, -2):
        a, b = depth.narrow(dim, 0, depth.shape[dim] - 1), depth.narrow(dim, 1,
                                                                      depth.shape[dim] - 1)
        jump = (a - b).abs() > ratio * torch.minimum(a, b)
        edge.narrow(dim, 0, depth.shape[dim] - 1).logical_or_(jump)
        edge.narrow(dim, 1, depth.shape[dim] - 1).logical_or_(jump)
    return edge
