"""Convex upsampling (RAFT) of channel-last fields, and the decoder's between-scale modules."""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn


def convex_upsample(field: torch.Tensor, mask: torch.Tensor, factor: int) -> torch.Tensor:
    """Upsample a channel-last field by ``factor`` with learned convex 3x3 combinations.

    Args:
        field: ``[N, H, W, D]`` values in units of the coarse grid (multiplied by ``factor``).
        mask: ``[N, 9 * factor**2, H, W]`` logits, viewed as ``[N, 1, 9, f, f, H, W]`` and
            softmax-normalised over the 9 neighbours.
        factor: integer upsampling factor ``f``.

    Returns:
        ``[N, f*H, f*W, D]``: each fine pixel is a convex combination of the 3x3 neighbourhood
        (zero padded) of ``f * field`` around its coarse pixel.
    """
    n, h, w, d = field.shape
    if mask.shape != (n, 9 * factor * factor, h, w):
        raise ValueError(f"mask must be [N, 9*f*f, H, W] for {field.shape=}, {factor=}; "
                         f"got {mask.shape=}")
    weights = mask.view(n, 9, 1, factor * factor, h * w).softmax(dim=1)
    neighbours = F.unfold(factor * field.permute(0, 3, 1, 2), kernel_size=3, padding=1)
    neighbours = neighbours.view(n, d, 9, 1, h * w)
    # accumulate neighbour by neighbour: the [N, 9, D, f*f, H*W] product of a one-shot
    # broadcast would be 9x the output (GBs at 4K)
    up = weights[:, 0] * neighbours[:, :, 0]  # [N, D, f*f, H*W]
    for k in range(1, 9):
        up.addcmul_(weights[:, k], neighbours[:, :, k])  # autograd-safe: inputs unchanged
    up = up.view(n, d, factor, factor, h, w)
    return up.permute(0, 4, 2, 5, 3, 1).reshape(n, factor * h, factor * w, d)


class UpConv(nn.Module):
    """Bring coarse decoder features to the next finer scale and fuse them with the encoder's.

    ``up``: transposed conv 2x2 stride 2 (coarse -> fine channels); the result is concatenated
    after the encoder features and fused by ``conv`` (1x1 -> ReLU -> 3x3).
    ``forward(coarse [N, h, w, Cc], skip [N, 2h, 2w, Cf]) -> [N, 2h, 2w, Cf]`` (channel-last).
    """

    def __init__(self, coarse_dim: int, fine_dim: int) -> None:
        super().__init__()
        self.up = nn.ConvTranspose2d(coarse_dim, fine_dim, 2, stride=2)
        self.conv = nn.Sequential(
            nn.Conv2d(2 * fine_dim, fine_dim, 1),
            nn.ReLU(),
            nn.Conv2d(fine_dim, fine_dim, 3, padding=1),
        )

    def forward(self, coarse: torch.Tensor, skip: torch.Tensor) -> torch.Tensor:
        up = self.up(coarse.permute(0, 3, 1, 2))
        fused = self.conv(torch.cat([skip.permute(0, 3, 1, 2), up], dim=1))
        return fused.permute(0, 2, 3, 1)


class UpMask(nn.Sequential):
    """Convex-upsampling mask head: 3x3 conv -> ReLU -> 1x1 conv to ``9 * factor**2`` logits.

    ``forward(x [N, H, W, C]) -> [N, 9*f*f, H, W]`` (channel-first, as :func:`convex_upsample`
    expects).
    """

    def __init__(self, dim: int, hidden: int, factor: int) -> None:
        super().__init__(
            nn.Conv2d(dim, hidden, 3, padding=1),
            nn.ReLU(),
            nn.Conv2d(hidden, 9 * factor * factor, 1),
        )

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return super().forward(x.permute(0, 3, 1, 2))
