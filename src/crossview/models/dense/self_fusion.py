"""A stereo network's two views fused with each other, no classical matcher.

The network runs twice: on the pair, and on the pair mirrored left to right with its images
swapped (the mirrored right image is the left image of a rectified pair:
:func:`mirrored`, :func:`mirrored_fields`). The network is not mirror symmetric, so the
second run is a second opinion; each pixel of each view takes the run whose two views agree
best there (:func:`more_consistent`). Chosen by leave-one-group-out over real-train's 17 groups
among the pair's run, the mirrored run, their mean and this choice, each with and without the
steps below (every fold chose this choice with them): left-out bad-2 17.70 % against 18.76 %
for the pair's run alone; development scenes 20.65 % against 22.97 %. With top-bottom mirrored
runs among the candidates too, the same rule over four runs was chosen, left-out 17.74 %: no
better, at twice the cost (docs/results/network-alone/README.md, item 15).

The fused default (:mod:`crossview.models.dense.sgbm_fusion`) keeps SGBM's left-right checked
disparity, fills what is left along the row, puts the depth edges on the colour edges with the
colour-weighted median and continues the out-of-view strip. Steps 3-5 take their values only
from the map they are given. Here they are given the network's own disparity where its two
views agree within :data:`SELF_FUSION_CHECK_PX` (SGBM's place in step 1), so that every pixel's
value is the network's: a consistent pixel keeps its own, an inconsistent one (occlusions,
mostly) takes the farther of the nearest consistent values along its row, the edge medians
choose among the network's values, and the strip continues them. Nothing here runs OpenCV's
matchers: on a GPU the network runs there and these numpy steps after it on the CPU, and
:class:`crossview.runtime.SelfFusedStereo` runs them on a ``crossview export onnx --no-fuse``
file (which holds the network alone with its own half-resolution pass and refinement).

Chosen by leave-one-group-out over real-train's 17 groups among the network alone, its edge
medians, its strip, both, and the fill at 0.5, 1, 2 or 4 px before both (every fold chose the
fill at 1 px): left-out bad-2 18.76 % against 20.76 % for the network alone; development scenes
22.97 % against 23.76 % (docs/results/network-alone/README.md, item 10).
"""

from __future__ import annotations

from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import TYPE_CHECKING, TypeVar

import numpy as np

from crossview.geometry.consistency_arrays import consistency_error
from crossview.geometry.disparity import field_to_disparity
from crossview.lazy import lazy_import
from crossview.models.dense.sgbm_fusion import FUSION_THREADS, fusion_steps

if TYPE_CHECKING:
    import torch
else:  # the numpy function runs without torch (as the fusion's); the tensor wrapper loads it
    torch = lazy_import("torch")
image_batch = lazy_import("crossview.data.image_batch")

# a pixel whose two views disagree by more than this (L1 px) is filled along the row; chosen by
# leave-one-group-out over {0.5, 1, 2, 4} (docs/results/network-alone/alone_postprocess.py)
SELF_FUSION_CHECK_PX = 1.0


def self_fused_disparities(images: Sequence[np.ndarray], disparity: np.ndarray,
                           error: np.ndarray) -> np.ndarray:
    """Both views' disparities ``[2B, H, W]`` float32 px (positive; left views first), each
    view's ``disparity [2B, H, W]`` kept where its left-right consistency ``error [2B, H, W]``
    (px) is at most :data:`SELF_FUSION_CHECK_PX` and the rest filled, medianed and continued
    as the fused default's steps 3-5 do (``images``: each row's view, RGB uint8
    ``[H, W, 3]``). Numpy only."""
    b = disparity.shape[0] // 2
    checked = np.where(error <= SELF_FUSION_CHECK_PX, disparity, np.nan).astype(np.float32)
    never = np.zeros(disparity.shape[1:], bool)  # no pixel goes to step 2's network rule

    def fuse_one(row: int) -> np.ndarray:
        return fusion_steps(disparity[row], never, checked[row], images[row],
                            "left" if row < b else "right").fused

    # numpy and the compiled median release the GIL: the views run side by side
    with ThreadPoolExecutor(max_workers=min(2 * b, FUSION_THREADS)) as pool:
        return np.stack(list(pool.map(fuse_one, range(2 * b))))


def mirrored(images: torch.Tensor) -> torch.Tensor:
    """Images ``[B, C, H, W]`` mirrored left to right. A rectified pair ``(left, right)``
    gives the rectified pair ``(mirrored(right), mirrored(left))``."""
    return images.flip(-1)


Fields = TypeVar("Fields", np.ndarray, "torch.Tensor")


def mirrored_fields(field: Fields) -> Fields:
    """Both views' stereo fields ``[2B, H, W, 2]`` (first images' rows first; a numpy array or
    a tensor) of a pair, as those of the mirrored, swapped pair ``(mirrored(second),
    mirrored(first))``, and back (the map is its own inverse): the views swapped, each
    mirrored left to right, x negated."""
    b, w = field.shape[0] // 2, field.shape[2]
    out = field[[*range(b, 2 * b), *range(b)]][:, :, list(range(w - 1, -1, -1))]
    out[..., 0] *= -1
    return out


def more_consistent(first: np.ndarray, second: np.ndarray) -> np.ndarray:
    """Per pixel and view, the field of ``first`` or ``second`` (both ``[2B, H, W, 2]``
    float32, both views of the same pair) whose left-right consistency error
    (:func:`crossview.geometry.consistency_arrays.consistency_error`, each against its own
    other view) is the smaller there; ``first``'s where they tie."""
    keep = consistency_error(first)[0] <= consistency_error(second)[0]
    return np.where(keep[..., None], first, second)


def self_fused_pair(images: Sequence[np.ndarray], field: np.ndarray,
                    mirror: np.ndarray) -> np.ndarray:
    """Both views' self-fused disparities ``[2B, H, W]`` float32 px (positive; left views
    first) from the network's fields ``field [2B, H, W, 2]`` on the pair and ``mirror`` on the
    mirrored, swapped pair (as that run gives them: :func:`mirrored_fields` maps them back),
    float32 px; ``images``: each row's view, RGB uint8 ``[H, W, 3]``. The more consistent of
    the two per pixel (:func:`more_consistent`), then :func:`self_fused_disparities` with its
    consistency error. Numpy only: ``crossview stereo --self-fuse`` and
    :class:`crossview.runtime.SelfFusedStereo` both run it."""
    b = field.shape[0] // 2
    chosen = more_consistent(field, mirrored_fields(mirror))
    disparity = np.concatenate([field_to_disparity(chosen[:b]),
                                field_to_disparity(chosen[b:], "right")])
    return self_fused_disparities(images, disparity, consistency_error(chosen)[0])


def fuse_with_itself(x0: torch.Tensor, x1: torch.Tensor, field: torch.Tensor,
                     mirror: torch.Tensor) -> torch.Tensor:
    """Both views' stereo fields ``[2B, H, W, 2]`` (left views first, x = -disparity) of the
    pair ``x0, x1 [B, 3, H, W]`` (0..255) fused with each other (:func:`self_fused_pair`,
    with the mirrored run's fields ``mirror``): the fused fields on ``field``'s device and
    dtype, y as ``field`` gives it."""
    b = x0.shape[0]
    images = [*image_batch.uint8_images(x0), *image_batch.uint8_images(x1)]
    fused = self_fused_pair(images, *(f.detach().float().cpu().numpy() for f in (field, mirror)))
    out = field.clone()
    out[..., 0] = torch.from_numpy(fused).to(field)
    out[:b, ..., 0] *= -1.0  # left views: x = -disparity
    return out
