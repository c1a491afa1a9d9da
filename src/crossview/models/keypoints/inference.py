"""Keypoint matching on one image pair of any sizes, for any :class:`KeypointMatcher`:
keypoint transfer and dense flows both ways.

The images are resized to the network's square input (as TransforMatcher's paper does);
because positions are handled in normalised ``[-1, 1]`` coordinates, keypoints and flows map
back to each image's own pixel frame exactly.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import Tensor

from crossview.models.keypoints.contract import KeypointMatcher
from crossview.models.keypoints.coordinates import (
    grid_centres,
    normalised_to_pixels,
    pixels_to_normalised,
)


def square(model: KeypointMatcher, image: Tensor) -> Tensor:
    """``image [B, 3, H, W]`` resized to the network's square input ``[B, 3, S, S]``."""
    return F.interpolate(image, size=(model.image_size, model.image_size), mode="bilinear",
                         align_corners=False, antialias=True)


def transfer_points(model: KeypointMatcher, coords: Tensor, points: Tensor,
                    src_size: tuple[int, int], tgt_size: tuple[int, int]) -> Tensor:
    """Source pixel ``points [N, 2]`` (of a ``src_size`` ``(H, W)`` image) through ``coords
    [1, G, G, 2]`` -> target pixels ``[N, 2]`` (of a ``tgt_size`` image), at the network's
    evaluation temperature ``model.eval_tau``."""
    kp = pixels_to_normalised(points, src_size[1], src_size[0])[None]
    return normalised_to_pixels(model.transfer(coords, kp, model.eval_tau)[0], tgt_size[1],
                                tgt_size[0])


def dense_flow(coords: Tensor, src_size: tuple[int, int], tgt_size: tuple[int, int],
               frame_shift: float = 0.0) -> Tensor:
    """``coords [1, G, G, 2]`` (normalised target position of each source cell, in a grid frame
    offset by ``frame_shift`` from the image frame, see :mod:`.contract`) -> pixel flow
    ``[2, Hs, Ws]`` from the source frame into the target frame.

    The normalised displacement is interpolated (not the positions: clamping at the border would
    bend an identity map) at each source pixel's grid-frame position, then both ends are mapped
    to their own pixel frames."""
    (hs, ws), (ht, wt) = src_size, tgt_size
    g = coords.shape[1:3]
    shift = (coords - grid_centres(*g, coords.device, coords.dtype)).permute(0, 3, 1, 2)
    ys, xs = torch.meshgrid(torch.arange(hs, dtype=coords.dtype, device=coords.device),
                            torch.arange(ws, dtype=coords.dtype, device=coords.device),
                            indexing="ij")
    pixels = torch.stack((xs, ys), -1)
    source = pixels_to_normalised(pixels, ws, hs)
    shift = F.grid_sample(shift, (source + frame_shift)[None], mode="bilinear",
                          padding_mode="border", align_corners=False)
    target = normalised_to_pixels(source + shift[0].permute(1, 2, 0), wt, ht)
    return (target - pixels).permute(2, 0, 1)


def match_pair(model: KeypointMatcher, src: Tensor, tgt: Tensor, points: Tensor,
               ) -> tuple[Tensor, Tensor, Tensor]:
    """Images ``[1, 3, Hs, Ws]``, ``[1, 3, Ht, Wt]`` (0..255), source pixel ``points [N, 2]``
    -> ``(transferred [N, 2] target px, flow [2, Hs, Ws], flow_backward [2, Ht, Wt])``."""
    (hs, ws), (ht, wt) = src.shape[-2:], tgt.shape[-2:]
    forward, backward = model.coords_both_ways(square(model, src), square(model, tgt))
    shift = model.frame_shift
    return (transfer_points(model, forward, points, (hs, ws), (ht, wt)),
            dense_flow(forward, (hs, ws), (ht, wt), shift),
            dense_flow(backward, (ht, wt), (hs, ws), shift))
