"""Training loss of TransforMatcher (Eq. 12): mean Euclidean distance of transferred keypoints."""

from __future__ import annotations

from torch import Tensor


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
