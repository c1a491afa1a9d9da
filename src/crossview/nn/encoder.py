"""ConvFormer (MetaFormer with separable-convolution token mixers), the MatchStereo encoder.

Four stages at 1/4, 1/8, 1/16 and 1/32 of the input resolution; every stage returns its
features channel-last. State-dict keys follow the published ConvFormer naming
(``downsample_layers``, ``stages``, ``head``) so that published checkpoints load unchanged.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch
from torch import nn

from crossview.nn.norms import ChannelLayerNorm

_ENCODER_EPS = 1e-6


class SepConv(nn.Module):
    """Inverted separable convolution: linear C->2C, GELU, depthwise 3x3, linear 2C->C.

    Input and output channel-last ``[N, H, W, C]``.
    """

    def __init__(self, dim: int, expansion: int = 2) -> None:
        super().__init__()
        hidden = expansion * dim
        self.pwconv1 = nn.Linear(dim, hidden, bias=False)
        self.act1 = nn.GELU()
        self.dwconv = nn.Conv2d(hidden, hidden, 3, padding=1, groups=hidden, bias=False)
        self.pwconv2 = nn.Linear(hidden, dim, bias=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.act1(self.pwconv1(x))
        x = self.dwconv(x.permute(0, 3, 1, 2)).permute(0, 2, 3, 1)
        return self.pwconv2(x)


class Mlp(nn.Module):
    """Two linear layers (no bias) with a GELU between; channel-last ``[..., C]``."""

    def __init__(self, dim: int, expansion: int = 2) -> None:
        super().__init__()
        self.fc1 = nn.Linear(dim, expansion * dim, bias=False)
        self.act = nn.GELU()
        self.fc2 = nn.Linear(expansion * dim, dim, bias=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.fc2(self.act(self.fc1(x)))


class Scale(nn.Module):
    """A per-channel scale that published checkpoints carry but the forward pass never uses.

    Kept only so that those checkpoints load with ``strict=True``.
    """

    def __init__(self, dim: int) -> None:
        super().__init__()
        self.scale = nn.Parameter(torch.ones(dim))


class MetaFormerBlock(nn.Module):
    """``x += SepConv(LN(x)); x += Mlp(LN(x))`` on channel-last ``[N, H, W, C]``."""

    def __init__(self, dim: int, unused_res_scale: bool = False) -> None:
        super().__init__()
        self.norm1 = ChannelLayerNorm(dim, _ENCODER_EPS)
        self.token_mixer = SepConv(dim)
        self.norm2 = ChannelLayerNorm(dim, _ENCODER_EPS)
        self.mlp = Mlp(dim)
        if unused_res_scale:
            self.res_scale1 = Scale(dim)
            self.res_scale2 = Scale(dim)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x + self.token_mixer(self.norm1(x))
        return x + self.mlp(self.norm2(x))


class StemDownsample(nn.Sequential):
    """Stage-0 stem: two stride-2 3x3 convs, each followed by InstanceNorm and GELU (x1/4).

    Input ``[N, 3, H, W]`` channel-first; output ``[N, H/4, W/4, C0]`` channel-last.
    """

    def __init__(self, dim: int) -> None:
        super().__init__(
            nn.Conv2d(3, dim // 2, 3, stride=2, padding=1),
            nn.InstanceNorm2d(dim // 2),
            nn.GELU(),
            nn.Conv2d(dim // 2, dim, 3, stride=2, padding=1),
            nn.InstanceNorm2d(dim),
            nn.GELU(),
        )

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return super().forward(x).permute(0, 2, 3, 1)


class Downsample(nn.Module):
    """LN then a stride-2 3x3 conv; channel-last ``[N, H, W, Cin]`` -> ``[N, H/2, W/2, Cout]``."""

    def __init__(self, dim_in: int, dim_out: int) -> None:
        super().__init__()
        self.pre_norm = ChannelLayerNorm(dim_in, _ENCODER_EPS)
        self.conv = nn.Conv2d(dim_in, dim_out, 3, stride=2, padding=1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.pre_norm(x).permute(0, 3, 1, 2)
        return self.conv(x).permute(0, 2, 3, 1)


class ConvFormer(nn.Module):
    """ConvFormer encoder returning the four stage outputs, fine to coarse.

    Args:
        dims: channels of the four stages (C0..C3).
        depths: blocks per stage; published models use ``(2, 2, 6, 2)``.
        num_classes: size of the unused ``head`` (1000 in the published checkpoints; 0 drops it).

    ``forward(x)`` takes ``[N, 3, H, W]`` (already normalised; H, W multiples of 32) and returns
    ``[f4, f8, f16, f32]`` with ``f_s`` of shape ``[N, H/s, W/s, C_i]`` (channel-last).
    """

    def __init__(self, dims: Sequence[int], depths: Sequence[int] = (2, 2, 6, 2),
                 num_classes: int = 1000) -> None:
        super().__init__()
        if len(dims) != 4 or len(depths) != 4:
            raise ValueError(f"ConvFormer needs 4 stages, got {dims=} {depths=}")
        layers: list[nn.Module] = [StemDownsample(dims[0])]
        layers += [Downsample(dims[i - 1], dims[i]) for i in range(1, 4)]
        self.downsample_layers = nn.ModuleList(layers)
        self.stages = nn.ModuleList(
            nn.Sequential(*(MetaFormerBlock(dims[i], unused_res_scale=i >= 2)
                            for _ in range(depths[i])))
            for i in range(4)
        )
        if num_classes:
            self.head = nn.Linear(dims[3], num_classes)

    def forward(self, x: torch.Tensor) -> list[torch.Tensor]:
        features = []
        for down, stage in zip(self.downsample_layers, self.stages, strict=True):
            x = stage(down(x))
            features.append(x)
        return features
