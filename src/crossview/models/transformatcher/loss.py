"""Training losses of TransforMatcher: Eq. 12 (mean Euclidean distance of transferred
keypoints) and its dense form (ours), every output cell against the exact correspondence
(:func:`oracle_coords`) of a warp whose pixel flow is known."""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import Tensor

from crossview.models.keypoints.coordinates import (
    grid_centres,
    normalised_to_pixels,
    pixels_to_normalised,
)


def keypoint_loss(predicted: Tensor, target: Tensor, valid: Tensor | None = None) -> Tensor:
    """Mean ``||predicted - target||_2`` over valid keypoints; ``[B, N, 2]`` each, ``valid [B, N]``.

    Coordinates are normalised ``[-1, 1]`` in training, as in the paper.
    """
    if predicted.shape != target.shape or predicted.shape[-1] != 2:
        raise ValueError(f"predicted and target must be equal [B, N, 2], got {predicted.shape=} "
                         f"{target.shape=}")
    dist = (predicted - target).norm(dim=-1)
    if valid is None:
        return dist.mean()
    if valid.shape != dist.shape:
        raise ValueError(f"valid must be [B, N] = {tuple(dist.shape)}, got {valid.shape=}")
    if not valid.any():
        raise ValueError("keypoint_loss needs at least one valid keypoint")
    return dist[valid].mean()


def _cell_centres(flow: torch.Tensor, cells: int, frame_shift: float) -> torch.Tensor:
    """Image-frame normalised centres ``[B, cells, cells, 2]`` of the output grid's cells, for
    sampling ``flow [B, 2, S, S]`` (the grid frame is offset by ``frame_shift``)."""
    centres = grid_centres(cells, cells, flow.device, flow.dtype) - frame_shift
    return centres.expand(len(flow), -1, -1, -1)


def oracle_coords(flow: torch.Tensor, cells: int, frame_shift: float = 0.0) -> torch.Tensor:
    """The exact correspondence as a dense map on the model's output grid: normalised target
    ``(x, y)`` ``[B, cells, cells, 2]`` of each cell centre, from the pixel ``flow [B, 2, S, S]``
    (bilinearly sampled at the centres), in the grid frame offset by ``frame_shift`` from the
    image frame (:attr:`TransforMatcher.frame_shift`, 0: the image frame). Through the soft
    sampler it bounds what any correlation on that grid can reach."""
    size = flow.shape[-1]
    centres = _cell_centres(flow, cells, frame_shift)
    shift = F.grid_sample(flow, centres, mode="bilinear", padding_mode="border",
                          align_corners=False)  # [B, 2, G, G]
    target = normalised_to_pixels(centres, size, size) + shift.permute(0, 2, 3, 1)
    return pixels_to_normalised(target, size, size) + frame_shift


def dense_loss(coords: torch.Tensor, flow: torch.Tensor, valid: torch.Tensor,
               frame_shift: float) -> torch.Tensor:
    """Mean distance (normalised units) between the model's ``coords [B, G, G, 2]`` and the
    exact correspondence of every output cell whose centre has a valid match (``valid [B, S,
    S]``, nearest pixel): Eq. 12 with every output cell as a keypoint, no soft sampler."""
    cells = coords.shape[1]
    exact = oracle_coords(flow, cells, frame_shift)
    inside = F.grid_sample(valid[:, None].to(flow.dtype), _cell_centres(flow, cells, frame_shift),
                           mode="nearest", align_corners=False)[:, 0] > 0.5
    return keypoint_loss(coords.flatten(1, 2), exact.flatten(1, 2), inside.flatten(1))
