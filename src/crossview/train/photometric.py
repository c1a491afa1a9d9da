"""Self-supervised loss for unlabelled real pairs: census photometric error plus edge-aware
smoothness, masked at occlusions (the recipe of UFlow, Jonschkowski et al., ECCV 2020).

For a field of both views ``[2B, H, W, 2]`` (reference rows first, as every crossview field),
each view's image is compared with the other image warped back along the field:

- photometric: the soft census distance (7x7 by default) between a view and the warped other
  view: a comparison of local intensity orderings, robust to the exposure and tone
  differences of real pairs. Pixels count only where the match is forward-backward consistent
  (``|f + f_other(p + f)|^2 < 0.01 (|f|^2 + |f_other(p + f)|^2) + 0.5``, UFlow's / UnFlow's
  test) and lands inside the other image; the mask carries no gradient;
- smoothness: second-order differences of the field, down-weighted at image edges
  (``exp(-edge_weight * |dI|)``, intensities in 0..1).
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

from crossview.data.camera_effects import luma
from crossview.geometry.consistency import other_view, warp_other_view
from crossview.geometry.warp import backward_warp
from crossview.train.losses import masked_mean

CENSUS_RADIUS = 3
# UFlow's soft census constants: the intensity step that counts as an ordering (0..255 grey)
# and the width of the soft Hamming distance
CENSUS_STEP = 0.81
HAMMING_EPS = 0.1
EDGE_WEIGHT = 150.0


def census_transform(images: torch.Tensor, radius: int = CENSUS_RADIUS) -> torch.Tensor:
    """Soft census signature of every pixel: ``[N, (2r+1)^2, H, W]`` with values in (-1, 1),
    ``d / sqrt(CENSUS_STEP + d^2)`` for each neighbour's grey difference ``d`` (replicated
    borders). ``images [N, 3, H, W]`` in 0..255."""
    grey = luma(images)
    size = 2 * radius + 1
    _, _, h, w = grey.shape
    padded = F.pad(grey, (radius,) * 4, mode="replicate")
    patches = F.unfold(padded, size).view(grey.shape[0], size * size, h, w)
    diff = patches - grey
    return diff / torch.sqrt(CENSUS_STEP + diff * diff)


def census_distance(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """Soft Hamming distance of two census signatures ``[N, K, H, W]``, averaged over the
    ``K`` neighbours: ``[N, H, W]`` in [0, 1)."""
    d = (a - b) ** 2
    return (d / (HAMMING_EPS + d)).mean(1)


def forward_backward_mask(field: torch.Tensor) -> torch.Tensor:
    """``[2B, H, W]`` bool: the match of each pixel is forward-backward consistent and inside
    the other view (no gradient)."""
    with torch.no_grad():
        field = field.detach().float()
        back, inside = warp_other_view(field)
        error = (field + back).pow(2).sum(-1)
        bound = 0.01 * (field.pow(2).sum(-1) + back.pow(2).sum(-1)) + 0.5
        return (error < bound) & inside


def smoothness(field: torch.Tensor, images: torch.Tensor,
               edge_weight: float = EDGE_WEIGHT) -> torch.Tensor:
    """Edge-aware second-order smoothness of ``field [N, H, W, 2]`` (px) given its view's
    ``images [N, 3, H, W]`` (0..255): the mean over x and y of ``w |f(p-1) - 2 f(p) + f(p+1)|``,
    ``w = exp(-edge_weight * g / 255)`` with ``g`` the larger of the channel-mean intensity
    steps on either side of ``p`` (a motion boundary on an image edge costs nothing, whichever
    side of it ``p`` lies)."""
    f = field.permute(0, 3, 1, 2)
    image = images / 255.0
    dx2 = (f[..., :-2] - 2 * f[..., 1:-1] + f[..., 2:]).abs().sum(1)
    dy2 = (f[..., :-2, :] - 2 * f[..., 1:-1, :] + f[..., 2:, :]).abs().sum(1)
    gx = (image[..., 1:] - image[..., :-1]).abs().mean(1)
    gy = (image[..., 1:, :] - image[..., :-1, :]).abs().mean(1)
    wx = torch.exp(-edge_weight * torch.maximum(gx[..., 1:], gx[..., :-1]))
    wy = torch.exp(-edge_weight * torch.maximum(gy[..., 1:, :], gy[..., :-1, :]))
    return 0.5 * ((wx * dx2).mean() + (wy * dy2).mean())


def photometric_loss(img0: torch.Tensor, img1: torch.Tensor, field: torch.Tensor, *,
                     smooth_weight: float) -> tuple[torch.Tensor, dict[str, float]]:
    """The self-supervised loss of a pair and its two-view field.

    Args:
        img0, img1: ``[B, 3, H, W]`` in 0..255.
        field: ``[2B, H, W, 2]`` px, rows ``:B`` map img0 into img1, rows ``B:`` img1 into img0.
        smooth_weight: weight of :func:`smoothness` against the census term.

    Returns:
        ``(census + smooth_weight * smoothness, {"photometric": .., "smooth": ..,
        "consistent": fraction of pixels in the mask})``.
    """
    if field.shape != (2 * img0.shape[0], *img0.shape[-2:], 2) or img0.shape != img1.shape:
        raise ValueError(f"field must be [2B, H, W, 2] for images [B, 3, H, W]; got "
                         f"{field.shape=}, {img0.shape=}, {img1.shape=}")
    field = field.float()
    views = torch.cat([img0, img1]).float()
    warped, _ = backward_warp(other_view(views), field.permute(0, 3, 1, 2))
    mask = forward_backward_mask(field)
    census = masked_mean(census_distance(census_transform(views), census_transform(warped)), mask)
    smooth = smoothness(field, views)
    total = census + smooth_weight * smooth
    return total, {"photometric": float(census.detach()), "smooth": float(smooth.detach()),
                   "consistent": float(mask.float().mean())}
