"""Backward warping of images (or any dense field) by optical flow or by stereo disparity.

Pixel centres sit at integer coordinates (the ``align_corners=True`` convention). Backward warping
reads the *other* view at the matched position: ``out[p] = other[p + flow[p]]`` for flow, and
``out[x, y] = right[x - d, y]`` for a disparity ``d`` of the left (reference) view. Values are
bilinearly interpolated; positions outside the image read zeros and are flagged by the returned
``inside`` mask.

Example:
    >>> import torch
    >>> right = torch.arange(12.0).view(1, 1, 3, 4)
    >>> left, inside = warp_by_disparity(right, torch.ones(1, 3, 4))
    >>> left[0, 0, 0].tolist(), inside[0, 0].tolist()
    ([0.0, 0.0, 1.0, 2.0], [False, True, True, True])
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

from crossview.pixel_grid import to_grid_coords


def backward_warp(image: torch.Tensor, flow: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Sample ``image`` at ``p + flow[p]`` for every pixel ``p``.

    Args:
        image: ``[B, C, H, W]`` float tensor (the view the flow points into).
        flow: ``[B, 2, H, W]`` float tensor, (x, y) displacement in pixels.

    Returns:
        ``(warped [B, C, H, W], inside [B, H, W] bool)``; ``inside`` tells whether the sampled
        position lies within ``[0, W-1] x [0, H-1]`` (outside, ``warped`` blends in zeros).
    """
    if image.ndim != 4:
        raise ValueError(f"image must be [B, C, H, W], got {image.shape=}")
    if flow.ndim != 4 or flow.shape[1] != 2:
        raise ValueError(f"flow must be [B, 2, H, W], got {flow.shape=}")
    if flow.shape[0] != image.shape[0] or flow.shape[2:] != image.shape[2:]:
        raise ValueError(f"flow and image disagree: {flow.shape=} vs {image.shape=}")
    if not image.is_floating_point() or not flow.is_floating_point():
        raise TypeError(f"image and flow must be floating point, got {image.dtype=}, {flow.dtype=}")
    _, _, h, w = image.shape
    ys = torch.arange(h, device=flow.device, dtype=flow.dtype).view(1, h, 1)
    xs = torch.arange(w, device=flow.device, dtype=flow.dtype).view(1, 1, w)
    px = xs + flow[:, 0]
    py = ys + flow[:, 1]
    aligned = bool(min(h, w) > 1)  # a plain bool also under torch.export's symbolic sizes
    if aligned:
        grid = torch.stack([to_grid_coords(px, w), to_grid_coords(py, h)], -1)
    else:  # align_corners=True maps a size-1 axis onto its one pixel whatever the position
        grid = torch.stack([(2.0 * px + 1.0) / w - 1.0, (2.0 * py + 1.0) / h - 1.0], -1)
    warped = F.grid_sample(image, grid.to(image.dtype), mode="bilinear", padding_mode="zeros",
                           align_corners=aligned)
    inside = (px >= 0) & (px <= w - 1) & (py >= 0) & (py <= h - 1)
    return warped, inside


def disparity_to_flow(disparity: torch.Tensor, *, reference: str = "left") -> torch.Tensor:
    """The flow ``[B, 2, H, W]`` of a rectified-stereo disparity ``[B, H, W]``.

    A left-view (reference) pixel ``x`` matches ``x - d`` in the right view; a right-view pixel
    matches ``x + d`` in the left view (``reference="right"``). The y component is zero.
    """
    if disparity.ndim != 3:
        raise ValueError(f"disparity must be [B, H, W], got {disparity.shape=}")
    if reference not in ("left", "right"):
        raise ValueError(f"reference must be 'left' or 'right', got {reference!r}")
    sign = -1.0 if reference == "left" else 1.0
    return torch.stack([sign * disparity, torch.zeros_like(disparity)], dim=1)


def warp_by_disparity(image: torch.Tensor, disparity: torch.Tensor, *,
                      reference: str = "left") -> tuple[torch.Tensor, torch.Tensor]:
    """Backward-warp the other stereo view into the reference view.

    Args:
        image: ``[B, C, H, W]``, the non-reference view (the right image when
            ``reference="left"``).
        disparity: ``[B, H, W]``, positive disparity of the reference view.
        reference: ``"left"`` reads ``image[x - d]``, ``"right"`` reads ``image[x + d]``.

    Returns:
        ``(warped [B, C, H, W], inside [B, H, W] bool)`` as in :func:`backward_warp`.
    """
    return backward_warp(image, disparity_to_flow(disparity, reference=reference))
