"""Initial correlation at 1/32 and the regression of the initial field (stereo and flow).

Both views are stacked on the batch axis (reference first, ``2B`` rows). The softmax volumes
returned here are the *filled* volumes the regression reads and training supervises.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from crossview.models.matchstereo.config import REGRESSION_WINDOW as _WINDOW
from crossview.nn.norms import ChannelLayerNorm


class InitCorrelation(nn.Module):
    """LN + linear ``q`` (reference view) and ``k`` (target view) for the all-pairs scores.

    ``forward(features [2B, h, w, C], task)`` returns ``(field [2B, h, w, 2], volume)`` where
    ``volume`` is ``[2B, D=w, h, w]`` for ``task="stereo"`` and ``[2B, h, w, h*w]`` for
    ``task="flow"``.
    """

    def __init__(self, dim: int) -> None:
        super().__init__()
        self.norm = ChannelLayerNorm(dim, 1e-5)
        self.q = nn.Linear(dim, dim, bias=False)
        self.k = nn.Linear(dim, dim, bias=False)

    def forward(self, features: torch.Tensor, task: str) -> tuple[torch.Tensor, torch.Tensor]:
        x = self.norm(features)
        b = x.shape[0] // 2
        q = self.q(x[:b]) * x.shape[-1] ** -0.5
        k = self.k(x[b:])
        if task == "stereo":
            volume = stereo_volume(torch.einsum("byic,byjc->byij", q, k))
            return regress_stereo(volume), volume
        if task == "flow":
            volume = flow_volume(q.flatten(1, 2) @ k.flatten(1, 2).transpose(1, 2), x.shape[1:3])
            return regress_flow(volume), volume
        raise ValueError(f"task must be 'stereo' or 'flow', got {task!r}")


def stereo_volume(scores: torch.Tensor) -> torch.Tensor:
    """Softmax disparity volumes of both views from row-wise scores, out-of-view filled.

    Args:
        scores: ``[B, h, w, w]``, ``scores[b, y, x_ref, x_tgt]``.

    Returns:
        ``[2B, D=w, h, w]``: rows ``:B`` the reference view (partner ``x - d``), rows ``B:`` the
        target view (partner ``x + d``). Entries without a partner have logit 0 before the
        softmax over ``d``; afterwards reference columns ``x < d`` copy column ``d`` and target
        columns ``x > w - 1 - d`` copy column ``w - 1 - d``.
    """
    w = scores.shape[-1]
    x = torch.arange(w, device=scores.device)
    d = x.view(w, 1)
    # gather index over the partner axis: [D, w] -> partner column for each (d, x)
    ref_idx = (x - d).clamp(min=0)
    tgt_idx = (x + d).clamp(max=w - 1)
    ref_valid = x >= d
    tgt_valid = x + d < w
    ref = _gather_diagonals(scores, ref_idx, ref_valid)
    tgt = _gather_diagonals(scores.transpose(-1, -2), tgt_idx, tgt_valid)
    volume = torch.cat([ref, tgt], dim=0).softmax(dim=1)  # [2B, D, h, w]
    ref_fill = torch.maximum(x, d).expand(w, w)  # column to copy for (d, x)
    tgt_fill = torch.minimum(x, w - 1 - d).expand(w, w)
    b = scores.shape[0]
    fill = torch.cat([ref_fill.expand(b, w, w), tgt_fill.expand(b, w, w)])  # [2B, D, w]
    fill = fill.unsqueeze(2).expand(-1, -1, volume.shape[2], -1)
    return volume.gather(3, fill)


def _gather_diagonals(scores: torch.Tensor, index: torch.Tensor,
                      valid: torch.Tensor) -> torch.Tensor:
    """``out[b, d, y, x] = scores[b, y, x, index[d, x]]`` where ``valid[d, x]``, else 0."""
    b, h, w, _ = scores.shape
    idx = index.t().reshape(1, 1, w, w).expand(b, h, w, w)  # [b, y, x, d]
    out = scores.gather(3, idx) * valid.t().to(scores.dtype)
    return out.permute(0, 3, 1, 2)


def regress_stereo(volume: torch.Tensor) -> torch.Tensor:
    """Initial stereo field from a filled ``[2B, D, h, w]`` volume (window k = 5).

    The arg-max of the 5-tap box-averaged volume (zero padding), clamped to ``[2, D - 3]``,
    centres a 5-entry window; probabilities below ``1/D`` are zeroed, the rest renormalised,
    and the disparity is their weighted mean index. Returns ``[2B, h, w, 2]``: reference rows
    ``(-disp, 0)``, target rows ``(+disp, 0)``.
    """
    n, depth, h, w = volume.shape
    half = _WINDOW // 2
    smoothed = F.avg_pool1d(volume.permute(0, 2, 3, 1).reshape(-1, 1, depth), _WINDOW, 1, half)
    centre = smoothed.view(n, h, w, depth).argmax(-1).clamp(half, depth - 1 - half)
    index = centre.unsqueeze(1) + torch.arange(-half, half + 1, device=volume.device).view(
        1, -1, 1, 1)
    prob = volume.gather(1, index)
    prob = prob * (prob >= 1.0 / depth)
    disp = (prob * index).sum(1) / prob.sum(1).clamp(min=1e-6)
    b = n // 2
    sign = torch.cat([-torch.ones(b), torch.ones(n - b)]).to(volume).view(n, 1, 1)
    return torch.stack([sign * disp, torch.zeros_like(disp)], dim=-1)


def flow_volume(scores: torch.Tensor, size: tuple[int, int]) -> torch.Tensor:
    """Softmax all-pairs volumes of both views: ``[B, hw, hw]`` scores -> ``[2B, h, w, hw]``."""
    h, w = size
    volume = torch.cat([scores, scores.transpose(1, 2)]).softmax(dim=-1)
    return volume.view(-1, h, w, h * w)


def regress_flow(volume: torch.Tensor) -> torch.Tensor:
    """Initial flow field from a ``[2B, h, w, h*w]`` volume (window 5x5).

    The arg-max over targets of the 5x5 box-filtered ``[hw, hw]`` matrix (query index by target
    index, zero padding) gives a target ``(idx // w, idx % w)``, clamped to
    ``[2, h-3] x [2, w-3]``; the 5x5 target window around it, with probabilities below
    ``1/(hw)`` zeroed and the rest renormalised, gives the mean target position. Returns the
    mean target position minus the query position, ``[2B, h, w, 2]`` (x, y).
    """
    n, h, w, hw = volume.shape
    half = _WINDOW // 2
    matrix = volume.reshape(n, 1, hw, hw)
    smoothed = F.avg_pool2d(matrix, _WINDOW, 1, half).view(n, h, w, hw)
    idx = smoothed.argmax(-1)
    row = torch.div(idx, w, rounding_mode="floor")
    cy = row.clamp(half, h - 1 - half)
    cx = (idx - row * w).clamp(half, w - 1 - half)  # idx % w, exportable with a symbolic w
    offsets = torch.arange(-half, half + 1, device=volume.device)
    ys = (cy.unsqueeze(-1) + offsets).unsqueeze(-1).expand(n, h, w, _WINDOW, _WINDOW)
    xs = (cx.unsqueeze(-1) + offsets).unsqueeze(-2).expand(n, h, w, _WINDOW, _WINDOW)
    prob = volume.gather(3, (ys * w + xs).reshape(n, h, w, -1))
    prob = prob * (prob >= 1.0 / hw)
    total = prob.sum(-1).clamp(min=1e-6)
    mean_x = (prob * xs.reshape(n, h, w, -1)).sum(-1) / total
    mean_y = (prob * ys.reshape(n, h, w, -1)).sum(-1) / total
    grid_y, grid_x = torch.meshgrid(torch.arange(h, device=volume.device),
                                    torch.arange(w, device=volume.device), indexing="ij")
    return torch.stack([mean_x - grid_x, mean_y - grid_y], dim=-1)
