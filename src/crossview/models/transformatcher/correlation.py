"""Multi-channel correlation (TransforMatcher Eq. 4), its 4D bilinear upsampling, and the
resampling of its channels along depth from one backbone's layers to another's.

For each backbone layer ``l`` the features of both images are resized to the correlation grid,
and ``C_l(i, j) = ReLU(cos(F_src^l(i), F_tgt^l(j)))``; the layers are stacked as channels.
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import Tensor

from crossview.pixel_grid import to_grid_coords


def multilayer_correlation(src_feats: list[Tensor], tgt_feats: list[Tensor],
                           size: tuple[int, int]) -> Tensor:
    """Correlation ``[B, L, h, w, h, w]`` of ``L`` feature pairs ``[B, C_l, H_l, W_l]``.

    Every feature map is resampled onto the grid ``size = (h, w)`` (by the position of its cells,
    :func:`_resize`) before the cosine similarity.
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
    """Resample ``x [B, C, H, W]`` onto the grid ``size = (h, w)`` by position.

    Every stride-2 stage of the backbones centres its output cell ``i`` on input cell ``2 i``
    (symmetric padding), so cell ``k`` of a map whose stride is ``r`` times the grid's (``r`` a
    power of two, e.g. the 8 x 8 stride-32 maps of a 240 px image on the 15 x 15 stride-16 grid)
    lies at grid position ``r k``, and grid cell ``j`` takes the bilinear value at ``k = j / r``
    (the edge value beyond the last cell). Plain ``align_corners=False`` resizing would instead
    stretch the map over the grid (8 -> 15: a 7 % scale error against the stride-16 layers).
    """
    if tuple(x.shape[-2:]) == tuple(size):
        return x
    axes = []
    for n_in, n_out in zip(x.shape[-2:], size, strict=True):
        ratio = 2.0 ** round(math.log2(n_out / n_in))
        k = torch.arange(n_out, dtype=x.dtype, device=x.device) / ratio
        axes.append(to_grid_coords(k, n_in))
    gy, gx = torch.meshgrid(*axes, indexing="ij")
    grid = torch.stack((gx, gy), dim=-1).expand(len(x), -1, -1, -1)
    return F.grid_sample(x, grid, mode="bilinear", padding_mode="border", align_corners=True)


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


def resample_layers(corr: Tensor, stages: tuple[int, ...], to: tuple[int, ...]) -> Tensor:
    """Channels of ``corr [B, sum(stages), ...]`` (``stages``: the layers of each backbone stage,
    in order) linearly resampled along depth, stage by stage, to ``to`` layers per stage ->
    ``[B, sum(to), ...]``. Layer ``i`` of a stage of ``n`` layers becomes depth ``i / (n - 1)``
    (0 for a one-layer stage) and takes the linear interpolation of the source layers there, so
    a refinement trained on one backbone's correlation reads another's (the stage structure of
    EfficientNet-Lite0 and -Lite2 is the same, deeper in Lite2)."""
    if len(stages) != len(to) or corr.shape[1] != sum(stages) or min(*stages, *to) < 1:
        raise ValueError(f"corr must have sum(stages) = {sum(stages)} channels and stages, to "
                         f"equally many positive counts, got {corr.shape=}, {stages=}, {to=}")
    layers, start = [], 0
    for n_in, n_out in zip(stages, to, strict=True):
        for i in range(n_out):
            depth = i * (n_in - 1) / max(n_out - 1, 1)
            low = min(int(depth), n_in - 1)
            high, frac = min(low + 1, n_in - 1), depth - low
            layers.append(corr[:, start + low] * (1 - frac) + corr[:, start + high] * frac)
        start += n_in
    return torch.stack(layers, dim=1)
