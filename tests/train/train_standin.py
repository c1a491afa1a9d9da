"""A tiny stand-in for MatchStereo with the same ``forward_fields`` outputs, and a tiny dataset.

Used to test the training infrastructure quickly (and from subprocesses: torchrun, kill -9).
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import nn
from torch.utils.data import Dataset


class StandInModel(nn.Module):
    """init volume at 1/32, a self and a cross field at 1/8, an ``up`` field at 1/4, full field."""

    def __init__(self) -> None:
        super().__init__()
        self.init_head = nn.Conv2d(3, 4, 1)
        self.self_head = nn.Conv2d(3, 2, 3, padding=1)
        self.cross_head = nn.Conv2d(5, 2, 3, padding=1)
        self.full_head = nn.Conv2d(5, 2, 3, padding=1)

    def forward_fields(self, img0: torch.Tensor, img1: torch.Tensor, task: str = "stereo"
                       ) -> dict:
        x = torch.cat([img0, img1]) / 127.5 - 1.0
        b = img0.shape[0]
        sign = torch.cat([-torch.ones(b), torch.ones(b)]).view(-1, 1, 1)
        x32 = F.avg_pool2d(x, 32)
        logits = self.init_head(x32)  # D = 4 bins
        d = x32.shape[-1]
        logits = logits[:, :1].expand(-1, d, -1, -1) * torch.arange(d).view(1, -1, 1, 1) / d
        volume = logits.softmax(dim=1)
        disp = (volume * torch.arange(d, dtype=x.dtype).view(1, -1, 1, 1)).sum(dim=1)
        init = torch.stack([sign * disp, torch.zeros_like(disp)], dim=-1)
        keep = torch.tensor([1.0, 0.0 if task == "stereo" else 1.0])  # stereo: y stays 0
        x8 = F.avg_pool2d(x, 8)
        self_field = self.self_head(x8).permute(0, 2, 3, 1) * 4 * keep
        cross_in = torch.cat([x8, self_field.permute(0, 3, 1, 2)], dim=1)
        cross_field = self_field + self.cross_head(cross_in).permute(0, 2, 3, 1) * keep
        up = 2 * F.interpolate(cross_field.permute(0, 3, 1, 2), scale_factor=2,
                               mode="bilinear").permute(0, 2, 3, 1)
        full_in = torch.cat([x, 4 * F.interpolate(up.permute(0, 3, 1, 2), scale_factor=4,
                                                  mode="bilinear")], dim=1)
        full = self.full_head(full_in).permute(0, 2, 3, 1) * keep
        fields = [self_field, cross_field, up]
        return {"init_field": init, "init_cv": volume, "fields": fields,
                "field_kinds": ["self", "cross", "up"], "field": full}


class StandInStereo(Dataset):
    """Sample ``i``: a random texture and its copy shifted by a constant disparity (seeded by i).

    ``nan_at`` lists indices whose ground truth is NaN (for the non-finite tests).
    """

    def __init__(self, length: int = 16, size: tuple[int, int] = (64, 64),
                 nan_at: tuple[int, ...] = ()) -> None:
        self.length = length
        self.size = size
        self.nan_at = set(nan_at)

    def __len__(self) -> int:
        return self.length

    def __getitem__(self, index: int) -> dict[str, torch.Tensor]:
        gen = torch.Generator().manual_seed(1000 + index)
        h, w = self.size
        shift = int(torch.randint(1, 6, (1,), generator=gen))
        texture = torch.rand(3, h, w + shift, generator=gen) * 255
        left, right = texture[:, :, shift:], texture[:, :, :w]
        gt = torch.zeros(h, w, 2)
        gt[..., 0] = -float(shift)
        if index in self.nan_at:
            gt[..., 0] = math.nan
        return {"img0": left, "img1": right, "gt": gt, "valid": torch.ones(h, w, dtype=torch.bool)}
