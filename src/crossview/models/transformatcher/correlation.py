"""Multi-channel correlation (TransforMatcher Eq. 4) and its 4D bilinear upsampling.

For each backbone layer ``l`` the features of both images are resized to the correlation grid,
and ``C_l(i, j) = ReLU(cos(F_src^l(i), F_tgt^l(j)))``; the layers are stacked as channels.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import Tensor


def multilayer_correlation(src_feats: list[Tensor], tgt_feats: list[Tensor],
                           size: tuple[int, int]) -> Tensor:
    """Correlation ``[B, L, h, w, h, w]`` of ``L`` feature pairs ``[B, C_l, H_l, W_l]``.

    Every feature map is resized to ``size = (h, w)`` bilinearly before the cosine similarity.
    """
    if len(src_feats) != len(tgt_feats) or not src_feats:
        raise ValueError(f"need as many source as target layers (>= 1), got "
                         f"{len(src_feats)} and {len(tgt_feats)}")
    layers = []
    for fs, ft in zip(src_feats, tgt_feats, strict=True):
        if fs.ndim != 4 or fs.shape[:2] != ft.shape[:2]:
            raise ValueError(f"feature pairs must be [B, C, H, W] with equal B, C, got "
                             f"{fs.shape=} {ft.shape=}")
        fs = F.normalize(_resize(fs, size).flatten(2), dim=1)  # [B, C, hw]
        ft = F.normalize(_resize(ft, size).flatten(2), dim=1)
        layers.append((fs.transpose(1, 2) @ ft).relu())
    h, w = size
    return torch.stack(layers, dim=1).unflatten(2, (h, w)).unflatten(-1, (h, w))


def _resize(x: Tensor, size: tuple[int, int]) -> Tensor:
    if tuple(x.shape[-2:]) == tuple(size):
        return x
    return F.interpolate(x, size=size, mode="bilinear", align_corners=False)


def upsample_correlation(corr: Tensor, factor: int = 2) -> Tensor:
    """4D bilinear upsampling of ``corr [B, hs, ws, ht, wt]`` by ``factor`` on every axis.

    Bilinear in 4D is separable: the source axes are resized for every target cell, then the
    target axes for every source cell (``align_corners=False``: cell centres stay cell centres).
    """
    if corr.ndim != 5:
        raise ValueError(f"corr must be [B, hs, ws, ht, wt], got {corr.shape=}")
    b, hs, ws, ht, wt = corr.shape
    x = corr.permute(0, 3, 4, 1, 2).reshape(b * ht * wt, 1, hs, ws)
    x = F.interpolate(x, scale_factor=factor, mode="bilinear", align_corners=False)
    hs2, ws2 = x.shape[-2:]
    x = x.reshape(b, ht, wt, hs2 * ws2).permute(0, 3, 1, 2).reshape(b * hs2 * ws2, 1, ht, wt)
    x = F.interpolate(x, scale_factor=factor, mode="bilinear", align_corners=False)
    return x.reshape(b, hs2, ws2, *x.shape[-2:])
