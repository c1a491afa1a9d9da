"""Normalised coordinates of keypoint matchers: ``[-1, 1]`` with the ``align_corners=False``
convention of ``grid_sample``. Cell ``i`` of an ``n``-cell axis has its centre at
``(2 * i + 1) / n - 1``, pixel ``x`` of a ``W``-pixel axis (pixel centres at integers) sits at
``(2 * x + 1) / W - 1``. Points are ``(x, y)``.

Example:
    >>> import torch
    >>> pixels_to_normalised(torch.tensor([0.0, 99.0]), 100, 50)
    tensor([-0.9900,  2.9800])
"""

from __future__ import annotations

import torch
from torch import Tensor


def cell_centres(cells: int, device: torch.device | None = None,
                 dtype: torch.dtype = torch.float32) -> Tensor:
    """Normalised centres ``(2 j + 1) / cells - 1`` ``[cells]`` of the cells of one axis."""
    return (2 * torch.arange(cells, device=device, dtype=dtype) + 1) / cells - 1


def grid_centres(h: int, w: int, device: torch.device | None = None,
                 dtype: torch.dtype = torch.float32) -> Tensor:
    """Normalised ``(x, y)`` centres of an ``h x w`` grid, ``[h, w, 2]``."""
    gy, gx = torch.meshgrid(cell_centres(h, device, dtype), cell_centres(w, device, dtype),
                            indexing="ij")
    return torch.stack((gx, gy), dim=-1)


def pixels_to_normalised(points: Tensor, width: int, height: int) -> Tensor:
    """Pixel ``(x, y)`` (pixel centres at integers) to normalised ``[-1, 1]`` coordinates."""
    size = points.new_tensor([width, height])
    return (2 * points + 1) / size - 1


def normalised_to_pixels(points: Tensor, width: int, height: int) -> Tensor:
    """Inverse of :func:`pixels_to_normalised`."""
    size = points.new_tensor([width, height])
    return ((points + 1) * size - 1) / 2
