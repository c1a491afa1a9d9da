"""A stereo network's two views fused with each other, no classical matcher.

The network runs on the pair and on the pair mirrored left to right with its images swapped
(the mirrored right image is the left image of a rectified pair: :func:`mirrored`,
:func:`mirrored_fields`), each at every scale of :data:`SELF_FUSION_SCALES` (the pair enlarged,
its fields resized back): six runs. The network is neither mirror symmetric nor scale
invariant, so each run is another opinion; each pixel of each view takes the run whose
matches look most alike around it: the least census matching cost averaged over
:data:`SELF_FUSION_CENSUS_WINDOW` px (:func:`best_matched`;
:mod:`crossview.geometry.census_arrays`). The images' own evidence sees what the runs'
left-right agreement cannot, a run wrong the same way in both views (thin structures, holes
through which the background shows). The mirrored run was chosen by
leave-one-group-out over real-train's 17 groups among the pair's run, the mirrored run, their
mean and this choice (left-out bad-2 17.70 % against 18.76 % for the pair's run alone;
docs/results/network-alone/README.md, item 15), the scales likewise among the pair at 1,
1.125, 1.25, 1.375, 1.5 and 2 times its size, alone, mirrored, with the pair's own run and
with both of its runs (every fold chose the pair's two runs with the two at 1.5: left-out
16.51 % against 17.70 % for the two at the pair's size; development scenes 18.56 % against
20.77 %; item 18), and the census choice among the choice by agreement (item 18's), by the
census cost over 1, 5, 9, 15 or 25 px, and by agreement then cost, each with the check at
0.5 or 1 px, over these four runs (every fold chose the census cost, over 15 px in 11 folds
and 25 in 6, with the check at 1 px: left-out 13.94 % against 16.51 %; better on all 28
real-train and all 8 development scenes, 15.39 % against 18.56 %; item 20), and with the runs
at 1.25 times the pair besides as settings too, every fold chose the six runs with the census
cost over 15 px and the check at 1 px (left-out 13.52 %), for half again the cost. A network
adapted to the pair (:mod:`crossview.train.pair_adaptation`) self-fuses the same six runs.

The fused default (:mod:`crossview.models.dense.sgbm_fusion`) keeps SGBM's left-right checked
disparity, fills what is left along the row, puts the depth edges on the colour edges with the
colour-weighted median and continues the out-of-view strip. Steps 3-5 take their values only
from the map they are given. Here they are given the network's own disparity where its two
views agree within :data:`SELF_FUSION_CHECK_PX` (SGBM's place in step 1), so that every pixel's
value is the network's: a consistent pixel keeps its own, an inconsistent one (occlusions,
mostly) takes the farther of the nearest consistent values along its row, the edge medians
choose among the network's values, and the strip continues them. Nothing here runs OpenCV's
matchers: on a GPU the network runs there and these numpy steps after it on the CPU, and
:class:`crossview.runtime.SelfFusedStereo` runs them on a ``crossview export onnx --self-fuse``
file (the network alone with its own half-resolution pass and refinement, at each scale).

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

from crossview.geometry.census_arrays import census_codes, census_cost
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
# the network runs on the pair and its mirror at each of these scales of the pair (the first 1:
# the pair's own run); chosen by leave-one-group-out (docs/results/network-alone/larger_scale.py
# chose 1 and 1.5 under the choice by agreement; run_evidence.py added 1.25 under the census)
SELF_FUSION_SCALES = (1.0, 1.25, 1.5)
# each pixel takes the run whose census cost averaged over this window (px) is the least;
# chosen by leave-one-group-out (docs/results/network-alone/run_evidence.py, item 20)
SELF_FUSION_CENSUS_WINDOW = 15


def self_fusion_sizes(shape: tuple[int, int], size: tuple[int, int] | None = None
                      ) -> list[tuple[int, int] | None]:
    """The size ``(H, W)`` the network runs at for each of :data:`SELF_FUSION_SCALES` (the
    first 1) on a pair of ``shape = (H, W)``: ``round(H * scale) x round(W * scale)`` of
    ``size`` (a fixed-resolution run's, else the pair's); ``size`` itself (``None``: the
    pair's own) at 1.

    >>> self_fusion_sizes((375, 450))
    [None, (469, 562), (562, 675)]
    """
    base = size or shape
    return [size if scale == 1 else (round(base[0] * scale), round(base[1] * scale))
            for scale in SELF_FUSION_SCALES]


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


def best_matched(fields: Sequence[np.ndarray], codes: Sequence[np.ndarray]) -> np.ndarray:
    """Per pixel and view, the field of the run of ``fields`` (each ``[2B, H, W, 2]`` float32,
    both views of the same pair) whose matches look most alike around it: the least census
    cost (:func:`crossview.geometry.census_arrays.census_cost`, averaged over
    :data:`SELF_FUSION_CENSUS_WINDOW` px); the first run's where they tie. ``codes``: each
    row's image's :func:`crossview.geometry.census_arrays.census_codes`."""
    costs = np.stack([census_cost(codes, field, SELF_FUSION_CENSUS_WINDOW) for field in fields])
    chosen = costs.argmin(0)[None, ..., None]  # [1, 2B, H, W, 1]
    return np.take_along_axis(np.stack(fields), chosen, 0)[0]


def self_fused_pair(images: Sequence[np.ndarray], fields: Sequence[np.ndarray],
                    mirrors: Sequence[np.ndarray]) -> np.ndarray:
    """Both views' self-fused disparities ``[2B, H, W]`` float32 px (positive; left views
    first) from the network's fields on the pair, ``fields``, and on the mirrored, swapped
    pair, ``mirrors`` (as those runs give them: :func:`mirrored_fields` maps them back), one of
    each per scale of :data:`SELF_FUSION_SCALES`, each ``[2B, H, W, 2]`` float32 px at the
    pair's size; ``images``: each row's view, RGB uint8 ``[H, W, 3]``. The best matched
    run per pixel (:func:`best_matched`, the runs in the order pair, mirror at each scale),
    then :func:`self_fused_disparities` with its consistency error. Numpy only: ``crossview
    stereo --self-fuse`` and :class:`crossview.runtime.SelfFusedStereo` both run it."""
    b = fields[0].shape[0] // 2
    runs = [run for field, mirror in zip(fields, mirrors, strict=True)
            for run in (field, mirrored_fields(mirror))]
    chosen = best_matched(runs, [census_codes(image) for image in images])
    disparity = np.concatenate([field_to_disparity(chosen[:b]),
                                field_to_disparity(chosen[b:], "right")])
    return self_fused_disparities(images, disparity, consistency_error(chosen)[0])


def fuse_with_itself(x0: torch.Tensor, x1: torch.Tensor, fields: Sequence[torch.Tensor],
                     mirrors: Sequence[torch.Tensor]) -> torch.Tensor:
    """Both views' stereo fields ``[2B, H, W, 2]`` (left views first, x = -disparity) of the
    pair ``x0, x1 [B, 3, H, W]`` (0..255) fused with each other (:func:`self_fused_pair` of the
    runs on the pair, ``fields``, and on its mirror, ``mirrors``, one of each per scale): the
    fused fields on the first field's device and dtype, y as it gives it."""
    b = x0.shape[0]
    images = [*image_batch.uint8_images(x0), *image_batch.uint8_images(x1)]

    def arrays(runs: Sequence[torch.Tensor]) -> list[np.ndarray]:
        return [run.detach().float().cpu().numpy() for run in runs]

    fused = self_fused_pair(images, arrays(fields), arrays(mirrors))
    field = fields[0]
    out = field.clone()
    out[..., 0] = torch.from_numpy(fused).to(field)
    out[:b, ..., 0] *= -1.0  # left views: x = -disparity
    return out
