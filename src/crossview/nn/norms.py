"""Layer norm over the channel axis with a learnable weight and no bias (MetaFormer style)."""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn


class ChannelLayerNorm(nn.Module):
    """LayerNorm over the last (channel) axis, learnable ``weight``, no bias.

    Input and output ``[..., C]``. ``eps`` is 1e-6 in the ConvFormer encoder and 1e-5 in the
    MatchStereo decoder; the published checkpoints depend on these values.
    """

    def __init__(self, dim: int, eps: float = 1e-5) -> None:
        super().__init__()
        self.weight = nn.Parameter(torch.ones(dim))
        self.eps = eps

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return F.layer_norm(x, (x.shape[-1],), self.weight, None, self.eps)
