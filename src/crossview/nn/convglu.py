"""ConvGLU: a gated MLP whose gate branch passes through a depthwise 3x3 convolution."""

from __future__ import annotations

import torch
from torch import nn


class ConvGLU(nn.Module):
    """``fc2(GELU(dwconv(a)) * v)`` with ``(a, v) = split(fc1(x))``.

    Input and output channel-last ``[N, H, W, C]``; ``fc1`` maps C -> 2*hidden (bias), the
    depthwise 3x3 conv (bias) runs on ``hidden`` channels, ``fc2`` maps hidden -> C (bias).
    MatchStereo uses ``hidden = 2*C``.
    """

    def __init__(self, dim: int, hidden: int | None = None) -> None:
        super().__init__()
        hidden = hidden or 2 * dim
        self.fc1 = nn.Linear(dim, 2 * hidden)
        self.dwconv = nn.Conv2d(hidden, hidden, 3, padding=1, groups=hidden)
        self.act = nn.GELU()
        self.fc2 = nn.Linear(hidden, dim)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        a, v = self.fc1(x).chunk(2, dim=-1)
        a = self.dwconv(a.permute(0, 3, 1, 2)).permute(0, 2, 3, 1)
        return self.fc2(self.act(a) * v)
