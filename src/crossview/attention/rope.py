"""Rotary position embedding (RoPE) helpers in the split-halves convention.

A feature block of ``2n`` channels is rotated pairwise, channel ``i`` with channel ``i + n``
(not interleaved), by the angle ``position * base**(-i / n)``::

    forward:  x_i' =  cos * x_i + sin * x_{i+n},   x_{i+n}' = -sin * x_i + cos * x_{i+n}
    inverse:  x_i' =  cos * x_i - sin * x_{i+n},   x_{i+n}' =  sin * x_i + cos * x_{i+n}

This is the convention of the public ``prope`` package (base 100 for image patches). Applying
the forward rotation to queries and keys makes their dot product depend only on the position
difference.
"""

from __future__ import annotations

import torch
from torch import Tensor


def rope_frequencies(n: int, base: float = 100.0, *, dtype: torch.dtype = torch.float64,
                     device: torch.device | str | None = None) -> Tensor:
    """The ``n`` angular frequencies ``base**(-i / n)``, ``[n]``."""
    if n <= 0:
        raise ValueError(f"need at least one frequency, got {n=}")
    return base ** (-torch.arange(n, dtype=dtype, device=device) / n)


def rope_coefficients(positions: Tensor, n: int, base: float = 100.0,
                      dtype: torch.dtype | None = None) -> tuple[Tensor, Tensor]:
    """``cos`` and ``sin`` ``[..., T, n]`` of the angles ``positions[..., T, None] * freqs``.

    Angles are computed in float64 and cast to ``dtype`` (default float32).
    """
    freqs = rope_frequencies(n, base, device=positions.device)
    angles = positions.to(torch.float64)[..., None] * freqs
    dtype = dtype or torch.float32
    return torch.cos(angles).to(dtype), torch.sin(angles).to(dtype)


def apply_rope(x: Tensor, cos: Tensor, sin: Tensor, *, inverse: bool = False) -> Tensor:
    """Rotate ``x`` ``[..., 2n]`` by ``cos``/``sin`` ``[..., n]`` (broadcast), split halves."""
    n = x.shape[-1] // 2
    if x.shape[-1] != 2 * n or cos.shape[-1] != n or sin.shape[-1] != n:
        raise ValueError(
            f"RoPE needs x with 2n channels and n coefficients, got {x.shape=}, {cos.shape=}"
        )
    first, second = x[..., :n], x[..., n:]
    if inverse:
        return torch.cat([cos * first - sin * second, sin * first + cos * second], dim=-1)
    return torch.cat([cos * first + sin * second, cos * second - sin * first], dim=-1)


def grid_positions(patch_grid: tuple[int, int], cameras: int = 1,
                   device: torch.device | str | None = None) -> Tensor:
    """Integer patch indices ``[cameras * h * w, 2]`` (x, y), tokens ordered camera, row, column.

    ``patch_grid`` is ``(h, w)`` patches; x (the column) varies fastest.
    """
    h, w = patch_grid
    if h <= 0 or w <= 0 or cameras <= 0:
        raise ValueError(f"need a non-empty grid, got {patch_grid=} and {cameras=}")
    ys, xs = torch.meshgrid(torch.arange(h, device=device), torch.arange(w, device=device),
                            indexing="ij")
    return torch.stack([xs.reshape(-1), ys.reshape(-1)], dim=-1).repeat(cameras, 1)
