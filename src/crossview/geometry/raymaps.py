"""Per-pixel or per-patch ray encodings of cameras (token-level camera conditioning).

Rays pass through pixel centres: pixel ``(x, y)`` has image coordinates ``(x + 0.5, y + 0.5)``.
With ``stride = p`` one ray per ``p x p`` patch passes through the patch centre
``(p * x + p / 2, p * y + p / 2)``. All maps are channel-last ``[..., h, w, C]``.

- naive raymap ``[o, d]``: camera centre and unit world-frame direction (6 channels);
- Plücker raymap ``[d, o x d]``: unit direction, then moment (6 channels); the moment is the
  same for every point ``o`` on the ray;
- CamRay (paper Eq. 22): camera-frame directions ``K^-1 [u, v, 1]`` (3 channels, ``z = 1``),
  which carry the intrinsics but not the extrinsics.
"""

from __future__ import annotations

import torch
from torch import Tensor

from crossview.geometry.cameras import Cameras, invert_intrinsics, invert_se3


def pixel_centers(height: int, width: int, stride: int = 1, *,
                  dtype: torch.dtype = torch.float32,
                  device: torch.device | str | None = None) -> Tensor:
    """Image coordinates ``[h, w, 2]`` (u, v) of pixel or patch centres.

    ``h = height // stride``, ``w = width // stride``; the sizes must divide by ``stride``.
    """
    if stride <= 0 or height % stride or width % stride:
        raise ValueError(f"image size {(height, width)} must divide by {stride=}")
    ys = (torch.arange(height // stride, dtype=dtype, device=device) + 0.5) * stride
    xs = (torch.arange(width // stride, dtype=dtype, device=device) + 0.5) * stride
    grid_y, grid_x = torch.meshgrid(ys, xs, indexing="ij")
    return torch.stack([grid_x, grid_y], dim=-1)


def camray_map(cameras: Cameras, stride: int = 1) -> Tensor:
    """CamRay: camera-frame directions ``K^-1 [u, v, 1]``, ``[..., h, w, 3]``."""
    uv = pixel_centers(cameras.height, cameras.width, stride,
                       dtype=cameras.K.dtype, device=cameras.K.device)
    homogeneous = torch.cat([uv, torch.ones_like(uv[..., :1])], dim=-1)
    K_inv = invert_intrinsics(cameras.K)[..., None, None, :, :]
    return (K_inv @ homogeneous[..., None])[..., 0]


def world_rays(cameras: Cameras, stride: int = 1) -> tuple[Tensor, Tensor]:
    """World-frame ray origins and unit directions, each ``[..., h, w, 3]``."""
    camera_to_world = invert_se3(cameras.viewmats)[..., None, None, :, :]
    directions = (camera_to_world[..., :3, :3] @ camray_map(cameras, stride)[..., None])[..., 0]
    directions = directions / directions.norm(dim=-1, keepdim=True)
    origins = camera_to_world[..., :3, 3].expand_as(directions)
    return origins, directions


def plucker_from_rays(origins: Tensor, directions: Tensor) -> Tensor:
    """Plücker coordinates ``[d, o x d]`` ``[..., 6]`` of rays ``o + t d`` (``[..., 3]`` each)."""
    if origins.shape[-1] != 3 or directions.shape[-1] != 3:
        raise ValueError(f"rays need 3 channels, got {origins.shape=} and {directions.shape=}")
    return torch.cat([directions, torch.linalg.cross(origins, directions, dim=-1)], dim=-1)


def plucker_raymap(cameras: Cameras, stride: int = 1) -> Tensor:
    """Plücker raymap ``[d, o x d]``, ``[..., h, w, 6]`` (direction first, then moment)."""
    return plucker_from_rays(*world_rays(cameras, stride))


def naive_raymap(cameras: Cameras, stride: int = 1) -> Tensor:
    """Naive raymap ``[o, d]``, ``[..., h, w, 6]`` (origin first, then unit direction)."""
    origins, directions = world_rays(cameras, stride)
    return torch.cat([origins, directions], dim=-1)
