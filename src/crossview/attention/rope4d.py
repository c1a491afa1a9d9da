"""Rotary position embedding over 4D match coordinates ``(y_src, x_src, y_tgt, x_tgt)``.

A match between source cell ``(y_s, x_s)`` and target cell ``(y_t, x_t)`` is a point of a 4D
grid. The channels are viewed as ``D / 2`` rotation pairs; pair ``j`` belongs to axis ``j % 4``
and uses frequency ``base ** (-(j // 4) / (D / 8))``, so every axis gets the same ``D / 8``
frequencies and every head of a contiguous head split sees several axes. A pair of axis ``a`` is
rotated by the angle ``position[a] * frequency``. Because rotations compose,
``<rope(q, p), rope(k, p')>`` depends on the positions only through the offset ``p - p'`` (per
axis, not through a flattened 1D index).
"""

from __future__ import annotations

import torch
from torch import Tensor


def rope4d_angles(positions: Tensor, dim: int, base: float = 100.0) -> Tensor:
    """Rotation angles ``[..., dim // 2]`` for 4D positions ``[..., 4]``; ``dim % 8 == 0``."""
    if positions.shape[-1] != 4:
        raise ValueError(f"positions must end with 4 coordinates, got {positions.shape=}")
    if dim % 8 != 0:
        raise ValueError(f"rope4d needs a channel count divisible by 8, got {dim=}")
    n_freq = dim // 8
    freqs = base ** (-torch.arange(n_freq, dtype=positions.dtype, device=positions.device) / n_freq)
    pair = torch.arange(dim // 2, device=positions.device)
    axis, level = pair % 4, pair // 4
    return positions[..., axis] * freqs[level]


def rope4d_rotation(angles: Tensor) -> Tensor:
    """Unit complex numbers ``exp(i * angles)`` ``[T, D // 2]``: compute them once for a model
    with many layers and pass them to :func:`apply_rope4d`."""
    return torch.polar(torch.ones_like(angles), angles)


def apply_rope4d(x: Tensor, angles: Tensor) -> Tensor:
    """Rotate the channel pairs ``(x[..., 2j], x[..., 2j + 1])`` of ``x [..., T, D]`` by
    ``angles [T, D // 2]`` (real, from :func:`rope4d_angles`, or complex, from
    :func:`rope4d_rotation`). A pair is one complex number, so the rotation is one product."""
    if x.shape[-1] % 2 != 0 or angles.shape[-1] * 2 != x.shape[-1]:
        raise ValueError(f"x channels must be twice the angle count, got {x.shape=} "
                         f"{angles.shape=}")
    if angles.shape[-2] != x.shape[-2]:
        raise ValueError(f"one angle row per token is needed, got {x.shape=} {angles.shape=}")
    rotation = angles if angles.is_complex() else rope4d_rotation(angles)
    pairs = x.unflatten(-1, (-1, 2))
    if pairs.stride(-1) != 1 or pairs.stride(-2) != 2:
        pairs = pairs.contiguous()
    z = torch.view_as_complex(pairs)  # float32 / float64 only
    return torch.view_as_real(z * rotation.to(z.dtype)).flatten(-2)


def match_positions(h_src: int, w_src: int, h_tgt: int, w_tgt: int,
                    device: torch.device | None = None,
                    dtype: torch.dtype = torch.float32) -> Tensor:
    """Integer 4D coordinates ``[h_src * w_src * h_tgt * w_tgt, 4]`` of every match, in the
    row-major order of a correlation ``[h_src, w_src, h_tgt, w_tgt]``."""
    axes = [torch.arange(n, dtype=dtype, device=device) for n in (h_src, w_src, h_tgt, w_tgt)]
    return torch.stack(torch.meshgrid(*axes, indexing="ij"), dim=-1).reshape(-1, 4)
