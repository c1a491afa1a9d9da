"""Left-right (stereo) and forward-backward (flow) consistency of two-view fields.

A field holds both views on the batch axis (``[2B, H, W, 2]``, reference rows first): row ``i``
maps a pixel ``p`` of its view to ``p + field[i, p]`` in the other view, whose field is row
``(i + B) mod 2B``. A match is consistent when the other view's field, sampled there, points
back: ``|field(p) + field_other(p + field(p))|_1 < threshold``.
"""

from __future__ import annotations

import torch

from crossview.geometry.warp import backward_warp


def other_view(x: torch.Tensor) -> torch.Tensor:
    """Swap the two halves of the batch axis: ``[2B, ...]`` -> rows ``B..2B-1, 0..B-1``."""
    if x.shape[0] % 2:
        raise ValueError(f"both views must be stacked on the batch axis, got {x.shape=}")
    return x.roll(x.shape[0] // 2, dims=0)


def warp_other_view(field: torch.Tensor) -> torch.Tensor:
    """The other view's field sampled at ``position + field``, ``[2B, H, W, 2]``.

    :func:`crossview.geometry.warp.backward_warp`: bilinear, pixel centres at integer
    coordinates (``align_corners=True``), zeros outside the image.
    """
    if field.ndim != 4 or field.shape[-1] != 2:
        raise ValueError(f"field must be [2B, H, W, 2], got {field.shape=}")
    sampled, _ = backward_warp(other_view(field).permute(0, 3, 1, 2), field.permute(0, 3, 1, 2))
    return sampled.permute(0, 2, 3, 1)


def consistency_error(field: torch.Tensor) -> torch.Tensor:
    """``|field + warp_other_view(field)|_1`` per pixel, ``[2B, H, W]`` (pixels of the field)."""
    return (field + warp_other_view(field)).abs().sum(-1)


def noc_mask(field: torch.Tensor, threshold: float) -> torch.Tensor:
    """Non-occlusion (consistency) mask ``[2B, H, W]``, bool: error below ``threshold``.

    MatchStereo uses ``threshold = 2`` tokens inside the decoder and 8 px on the full-resolution
    output (the published inference script).
    """
    return consistency_error(field) < threshold
