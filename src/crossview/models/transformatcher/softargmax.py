"""From a 4D correlation to dense correspondences and transferred keypoints.

Coordinates are normalised to ``[-1, 1]`` (:mod:`crossview.models.keypoints.coordinates`).
Points are ``(x, y)``.

- :func:`kernel_soft_argmax` (TransforMatcher Eq. 10): for every source cell, the expected target
  position under ``softmax(beta * C)`` multiplied by a Gaussian of width ``sigma`` cells centred at
  the arg-max, i.e. ``softmax(beta * C - d^2 / (2 sigma^2))``; the kernel suppresses distant
  secondary peaks while keeping the result differentiable.
- :func:`hard_argmax` : the target cell centre of the best score (the no-refinement baseline).
- :func:`soft_sample` (Eq. 11): a source keypoint takes the target positions of the source cells,
  weighted by ``softmax(-distance / tau)`` of its distance to the cell centres.
"""

from __future__ import annotations

import torch
from torch import Tensor

from crossview.models.keypoints.coordinates import grid_centres


def _check_corr(corr: Tensor) -> None:
    if corr.ndim != 5:
        raise ValueError(f"corr must be [B, hs, ws, ht, wt], got {corr.shape=}")


def kernel_soft_argmax(corr: Tensor, sigma: float = 10.0, beta: float | Tensor = 1.0) -> Tensor:
    """Normalised target ``(x, y)`` ``[B, hs, ws, 2]`` of ``corr [B, hs, ws, ht, wt]``.

    ``sigma`` is in target grid cells; ``beta`` is the softmax inverse temperature.
    """
    _check_corr(corr)
    ht, wt = corr.shape[-2:]
    scores = corr.flatten(3)  # [B, hs, ws, ht*wt]
    best = scores.argmax(dim=-1)
    by, bx = (best // wt).to(corr.dtype), (best % wt).to(corr.dtype)
    ty = torch.arange(ht, device=corr.device, dtype=corr.dtype).repeat_interleave(wt)
    tx = torch.arange(wt, device=corr.device, dtype=corr.dtype).repeat(ht)
    dist2 = (ty - by.unsqueeze(-1)) ** 2 + (tx - bx.unsqueeze(-1)) ** 2
    weights = (beta * scores - dist2 / (2 * sigma**2)).softmax(dim=-1)
    return weights @ grid_centres(ht, wt, corr.device, corr.dtype).reshape(-1, 2)


def hard_argmax(corr: Tensor) -> Tensor:
    """Target cell centres ``[B, hs, ws, 2]`` of the best score of ``corr [B, hs, ws, ht, wt]``."""
    _check_corr(corr)
    ht, wt = corr.shape[-2:]
    best = corr.flatten(3).argmax(dim=-1)
    return grid_centres(ht, wt, corr.device, corr.dtype).reshape(-1, 2)[best]


def soft_sample(coords: Tensor, keypoints: Tensor, tau: float = 0.05) -> Tensor:
    """Transfer ``keypoints [B, N, 2]`` (normalised source ``(x, y)``) through the dense map
    ``coords [B, hs, ws, 2]`` (normalised target position of each source cell); ``[B, N, 2]``."""
    if coords.ndim != 4 or coords.shape[-1] != 2:
        raise ValueError(f"coords must be [B, hs, ws, 2], got {coords.shape=}")
    if keypoints.ndim != 3 or keypoints.shape[-1] != 2 or keypoints.shape[0] != coords.shape[0]:
        raise ValueError(f"keypoints must be [B, N, 2] with B = {coords.shape[0]}, "
                         f"got {keypoints.shape=}")
    hs, ws = coords.shape[1:3]
    centres = grid_centres(hs, ws, coords.device, coords.dtype).reshape(1, 1, -1, 2)
    dist = (keypoints.unsqueeze(2) - centres).norm(dim=-1)  # [B, N, hs*ws]
    weights = (-dist / tau).softmax(dim=-1)
    return weights @ coords.flatten(1, 2)
