"""A stereo network's disparities fused with OpenCV SGBM's, view by view.

The two fail in different places. SGBM (:mod:`crossview.models.dense.classical`) leaves holes
where it is unsure (occlusions, weak texture, speckles) and is sharp where it answers; the
network answers everywhere, smoothly, and is weakest on thin structures and depth edges. SGBM
compares intensities, so it first sees the right image toned to the left through the
network's consistent matches when the two differ by :data:`TONE_MATCH_MIN_GREY` grey levels or
more (:mod:`crossview.models.dense.tone_matching`: cameras that expose differently). The
fusion then keeps, per pixel of each view:

1. SGBM's disparity where SGBM has one and its two views agree within
   :data:`FUSION_SGBM_CHECK_PX` (:func:`~crossview.models.dense.classical.left_right_checked`);
   SGBM runs twice (:data:`FUSION_SGBM_RUNS`): first on the grey images and their rank
   transforms (:func:`~crossview.models.dense.rank_transform.rank_matching_image`), which match
   where the two images' brightness differs, then on the colour images, whose answers fill the
   first run's holes; each runs on the pair widened by repeated border columns (``pad=True``),
   so that it answers at the border where OpenCV leaves ``numDisparities`` columns empty, with
   a uniqueness ratio of :data:`FUSION_SGBM_UNIQUENESS` (the check removes what the lower ratio
   lets through);
2. in SGBM's holes that run longer than :data:`FUSION_NETWORK_RUN_PX` along the row
   (:func:`~crossview.models.dense.classical.hole_run_length`), the network's where its two
   views agree within :data:`FUSION_CONSISTENCY_PX`
   (:func:`crossview.geometry.consistency.noc_mask`); shorter holes are left to step 3;
3. what is left (occlusions, mostly) filled along the row with the farther of the nearest
   values (:func:`~crossview.models.dense.classical.fill_holes`, Middlebury's rule);
4. around the depth edges of the result, the colour-weighted median
   (:func:`~crossview.geometry.edge_weighted_median.edge_weighted_median`; passes
   :data:`EDGE_MEDIANS`, a wide sparse window then a narrow dense one), which puts the edges
   that SGBM's blocks fatten and the fill moves back on the colour edges of the view's image;
5. the strip along the border that the other camera does not see (a pixel whose match falls
   outside the other image) continued linearly from the surface beside it
   (:func:`~crossview.geometry.out_of_view.extend_out_of_view`, :data:`OUT_OF_VIEW`) instead of
   the constant that steps 1-3 leave there.

Which of steps 1-3 answers each pixel is :func:`fusion_sources` (:data:`SGBM`,
:data:`NETWORK`, :data:`FILL`), the one place that rule is written; :func:`fusion_steps` keeps
each step's result and :func:`fusion_inputs` what the fusion of a pair hands each view
(docs/results/who-answers measures who answers on real scenes).

The fusion is numpy and OpenCV (:func:`fused_disparities`, :func:`view_inputs`), so that
:mod:`crossview.runtime` runs it without torch; :func:`fuse_with_sgbm` and
:func:`fusion_inputs` are their forms on tensors, which
:func:`crossview.models.dense.inference.predict_fields` calls.

SGBM's search range comes from the network's largest disparity of the pair
(:func:`~crossview.models.dense.classical.sgbm_num_disparities`); no ground truth is read.
The lengths and thresholds above are in pixels, chosen on images at most 740 px wide;
:func:`fuse_view` takes a ``scale`` for them, which the default leaves at 1 (scaling with the
image width helped on real-train scenes upsampled twice but hurt the KITTI scene, whose width
is field of view, not resolution: docs/results/real-stereo/real_fusion_scale.py).
The rule, its thresholds, the padding and the median's settings were chosen by
leave-one-group-out on real scenes (docs/results/real-stereo/README.md,
``docs/results/real-stereo/real_fusion.py``, ``docs/results/real-stereo/real_edge_median.py``,
``docs/results/real-stereo/real_sgbm_border.py``, ``docs/results/real-stereo/real_out_of_view.py``,
``docs/results/real-stereo/real_fusion_thresholds.py``,
``docs/results/real-stereo/real_tone_matching.py``, ``docs/results/real-stereo/real_rank_sgbm.py``).
"""

from __future__ import annotations

from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import TYPE_CHECKING, NamedTuple

import numpy as np

from crossview.geometry.consistency_arrays import noc_mask
from crossview.geometry.disparity import field_to_disparity
from crossview.geometry.edge_weighted_median import edge_weighted_median
from crossview.geometry.out_of_view import extend_out_of_view
from crossview.lazy import lazy_import
from crossview.models.dense.classical import (
    fill_holes,
    hole_run_length,
    left_right_checked,
    sgbm_disparity,
    sgbm_num_disparities,
    sgbm_right_disparity,
)
from crossview.models.dense.opencv_threads import shared_opencv_threads
from crossview.models.dense.rank_transform import rank_matching_image
from crossview.models.dense.tone_matching import right_toned_to_left

if TYPE_CHECKING:
    import torch
else:  # the numpy functions run without torch (crossview.runtime); the tensor wrappers load it
    torch = lazy_import("torch")
image_batch = lazy_import("crossview.data.image_batch")
tensor_consistency = lazy_import("crossview.geometry.consistency")

# SGBM's left-right check; chosen by leave-one-group-out over {none, 0.5, 1, 2, 4} px
FUSION_SGBM_CHECK_PX = 1.0
# chosen together by leave-one-group-out over uniqueness {3, 5, 10} x consistency {0, 0.25,
# 0.5} px x runs {0, 16, 32, 64, 128} px (docs/results/real-stereo/real_fusion_thresholds.py)
FUSION_SGBM_UNIQUENESS = 3
FUSION_CONSISTENCY_PX = 0.5
FUSION_NETWORK_RUN_PX = 128
FUSION_THREADS = 2  # the views fused at once
# step 1's SGBM runs in order, each filling the holes that the runs before it left: the keyword
# arguments of rank_matching_image, or {} for the colour images; chosen by leave-one-group-out
# over radius {2, ..., 7} x grey channels {0, 1, 2}, with and without the colour run after it,
# and the colour run alone (docs/results/real-stereo/real_rank_sgbm.py)
FUSION_SGBM_RUNS: tuple[dict, ...] = ({"radius": 5, "grey_channels": 2}, {})
# step 4: 5 x 5 samples 6 px apart around jumps > 2 px, then 2 px apart around jumps > 1 px;
# chosen by leave-one-group-out over 64 settings that fit the time budget
# (docs/results/real-stereo/real_edge_median.py)
EDGE_MEDIANS = ({"jump": 2.0, "width": 2, "radius": 12, "step": 6, "sigma_colour": 20.0},
                {"jump": 1.0, "width": 2, "radius": 4, "step": 2, "sigma_colour": 20.0})
# step 5: chosen by leave-one-group-out over spans {12, 16, 24} x rows {10, 25, 50, 100},
# before or after step 4 (docs/results/real-stereo/real_out_of_view.py)
OUT_OF_VIEW = {"span": 16, "rows": 100}
# step 0: SGBM sees the right image toned to the left through the network's consistent matches
# when the tone curves differ from the identity by at least this many grey levels (None: never);
# chosen by leave-one-group-out over {never, 0, 2, 4, 8} on real-train scenes with the right
# image's gain, gamma or colour changed (docs/results/real-stereo/real_tone_matching.py)
TONE_MATCH_MIN_GREY: float | None = 8.0
# which of steps 1-3 answers a pixel (fusion_sources)
SGBM, NETWORK, FILL = 1, 2, 3


def scaled_median(settings: dict, scale: float, jumps: float | None = None) -> dict:
    """An :data:`EDGE_MEDIANS` pass with its band and window scaled by ``scale`` (as many
    samples: the step scales, the radius stays that many steps) and its jump by ``jumps``
    (default ``scale``)."""
    step = max(1, round(settings["step"] * scale))
    return {**settings, "jump": settings["jump"] * (scale if jumps is None else jumps),
            "width": max(1, round(settings["width"] * scale)),
            "radius": settings["radius"] // settings["step"] * step, "step": step}


def fusion_sources(network: np.ndarray, consistent: np.ndarray, classical: np.ndarray, *,
                   network_run: int = FUSION_NETWORK_RUN_PX, scale: float = 1.0) -> np.ndarray:
    """Which of steps 1-3 answers each pixel of one view: ``[H, W]`` uint8, :data:`SGBM` where
    SGBM's checked disparity ``classical [H, W]`` (NaN at holes) is finite, :data:`NETWORK`
    where the network's ``[H, W]`` is consistent (``consistent [H, W]`` bool) in a hole longer
    than ``network_run * scale`` px along the row, :data:`FILL` elsewhere (the row fill's).
    :func:`fuse_view` keeps the values these labels name; steps 4 and 5 may move them after.

    >>> fusion_sources(np.zeros((1, 4)), np.array([[True, True, False, False]]),
    ...                np.array([[1.0, np.nan, np.nan, 2.0]]), network_run=1).tolist()
    [[1, 2, 3, 1]]
    """
    if not network.shape == consistent.shape == classical.shape:
        raise ValueError(f"the maps differ in shape: {network.shape=}, {consistent.shape=}, "
                         f"{classical.shape=}")
    trusted = consistent & (hole_run_length(classical) > network_run * scale)
    return np.where(np.isfinite(classical), np.uint8(SGBM),
                    np.where(trusted, np.uint8(NETWORK), np.uint8(FILL)))


class FusionSteps(NamedTuple):
    """One view's fusion step by step (:func:`fusion_steps`): ``sources [H, W]`` uint8
    (:func:`fusion_sources`), and the disparity ``[H, W]`` float32 px after step 3
    (``filled``), step 4 (``medianed``) and step 5 (``fused``, what :func:`fuse_view`
    returns)."""

    sources: np.ndarray
    filled: np.ndarray
    medianed: np.ndarray
    fused: np.ndarray


def fusion_steps(network: np.ndarray, consistent: np.ndarray, classical: np.ndarray,
                 image: np.ndarray | None = None, view: str = "left", *,
                 network_run: int = FUSION_NETWORK_RUN_PX, scale: float = 1.0,
                 jumps: float | None = None,
                 medians: tuple[dict, ...] | None = None) -> FusionSteps:
    """:func:`fuse_view` (same arguments), each step's result kept; without ``image``, steps
    4 and 5 are skipped (``medianed`` and ``fused`` are ``filled``)."""
    if view not in ("left", "right"):
        raise ValueError(f"view must be 'left' or 'right', got {view!r}")
    sources = fusion_sources(network, consistent, classical, network_run=network_run,
                             scale=scale)
    sparse = np.where(sources == SGBM, classical,
                      np.where(sources == NETWORK, network, np.nan))
    filled = fill_holes(sparse)
    if image is None:
        return FusionSteps(sources, filled, filled, filled)
    medianed = filled
    for settings in EDGE_MEDIANS if medians is None else medians:
        medianed = edge_weighted_median(medianed, image, **scaled_median(settings, scale, jumps))
    strip = {key: max(1, round(value * scale)) for key, value in OUT_OF_VIEW.items()}
    if view == "left":
        fused = extend_out_of_view(medianed, **strip)
    else:
        fused = np.ascontiguousarray(extend_out_of_view(medianed[:, ::-1], **strip)[:, ::-1])
    return FusionSteps(sources, filled, medianed, fused)


def fuse_view(network: np.ndarray, consistent: np.ndarray, classical: np.ndarray,
              image: np.ndarray | None = None, view: str = "left", *,
              network_run: int = FUSION_NETWORK_RUN_PX, scale: float = 1.0,
              jumps: float | None = None,
              medians: tuple[dict, ...] | None = None) -> np.ndarray:
    """One view's fused disparity ``[H, W]`` float32 px from the network's ``[H, W]``, its
    consistency mask ``[H, W]`` bool and SGBM's ``[H, W]`` (NaN at holes), by steps 1-3 above
    (the network's pixels in holes longer than ``network_run * scale`` px); with the view's
    ``image [H, W, 3]`` (0..255), steps 4 and 5 too, their lengths times ``scale`` and the
    median's jumps times ``jumps`` (default ``scale``) (``view``: ``"left"`` or ``"right"``,
    whose out-of-view strip lies along the other border; ``medians``: step 4's passes, in
    order, ``None`` for :data:`EDGE_MEDIANS`, ``()`` for none). Which step answers each pixel:
    :func:`fusion_sources`; each step's result: :func:`fusion_steps`."""
    return fusion_steps(network, consistent, classical, image, view, network_run=network_run,
                        scale=scale, jumps=jumps, medians=medians).fused


class ViewInputs(NamedTuple):
    """What :func:`fuse_view` fuses for one view (:func:`fusion_inputs`): the network's
    disparity ``[H, W]`` float32 px, its consistency mask ``[H, W]`` bool, SGBM's left-right
    checked disparity ``[H, W]`` (NaN at holes; step 1's runs merged), the view's image
    ``[H, W, 3]`` uint8 and ``view`` (``"left"`` or ``"right"``)."""

    network: np.ndarray
    consistent: np.ndarray
    classical: np.ndarray
    image: np.ndarray
    view: str


class FusedFields(NamedTuple):
    """What :func:`fuse_with_sgbm` returns: the fused fields ``[2B, H, W, 2]`` (y as given),
    and per view the share ``[2B]`` (in [0, 1]) of its pixels that the network answers
    (:data:`NETWORK` of :func:`fusion_sources`): where it is ~0, the network's weights only
    set SGBM's search range and the tone match."""

    field: torch.Tensor
    network_share: torch.Tensor


class FusedViews(NamedTuple):
    """What :func:`fused_disparities` returns: both views' fused disparities ``[2B, H, W]``
    float32 px (positive; left views first) and per view the share ``[2B]`` float64 of its
    pixels that the network answers (:class:`FusedFields`)."""

    disparity: np.ndarray
    network_share: np.ndarray


def fuse_with_sgbm(x0: torch.Tensor, x1: torch.Tensor, field: torch.Tensor, *,
                   runs: tuple[dict, ...] | None = None,
                   medians: tuple[dict, ...] | None = None) -> FusedFields:
    """Both views' stereo fields fused with SGBM: :func:`fused_disparities` on tensors.

    Args:
        x0, x1: the left and right images ``[B, 3, H, W]``, 0..255 (rounded to uint8 for
            SGBM).
        field: the network's fields ``[2B, H, W, 2]`` (left views first, x = -disparity;
            right views, x = +disparity), as :func:`crossview.models.dense.inference.predict_fields`
            holds them.
        runs: step 1's SGBM runs, in order (at least one; ``None``: :data:`FUSION_SGBM_RUNS`).
        medians: step 4's passes, in order (``()`` for none; ``None``: :data:`EDGE_MEDIANS`).

    Returns:
        :class:`FusedFields`: the fused fields ``[2B, H, W, 2]`` on ``field``'s device and
        dtype, and the network's share of each view ``[2B]`` (float32, same device).
    """
    b = x0.shape[0]
    views = fused_disparities(image_batch.uint8_images(x0), image_batch.uint8_images(x1),
                              field.detach().float().cpu().numpy(), runs=runs, medians=medians,
                              consistent=_consistent(field))
    fused = field.clone()
    fused[..., 0] = torch.from_numpy(views.disparity).to(field)
    fused[:b, ..., 0] *= -1.0  # left views: x = -disparity
    share = torch.from_numpy(views.network_share).to(field.device, torch.float32)
    return FusedFields(fused, share)


def fused_disparities(images0: Sequence[np.ndarray], images1: Sequence[np.ndarray],
                      field: np.ndarray, *, runs: tuple[dict, ...] | None = None,
                      medians: tuple[dict, ...] | None = None,
                      consistent: np.ndarray | None = None) -> FusedViews:
    """Both views' fused disparities ``[2B, H, W]`` float32 px (positive; left views first)
    and the network's share of each view ``[2B]`` (:class:`FusedViews`), from the ``B`` left
    and right images (RGB uint8 ``[H, W, 3]`` each) and the network's fields
    ``field [2B, H, W, 2]`` float32 (left views first, x = -disparity; right views,
    x = +disparity); ``runs`` and ``medians`` as in :func:`fuse_with_sgbm`, which runs this
    on tensors; ``consistent``: the fields' consistency mask ``[2B, H, W]`` bool if known
    (:func:`view_inputs`). Numpy and OpenCV only: what :mod:`crossview.runtime` fuses with."""
    inputs = view_inputs(images0, images1, field, runs=runs, consistent=consistent)

    def fuse_one(view: ViewInputs) -> FusionSteps:
        return fusion_steps(*view, medians=medians)

    # numpy and OpenCV release the GIL: the views run side by side
    with ThreadPoolExecutor(max_workers=min(len(inputs), FUSION_THREADS)) as pool:
        steps = list(pool.map(fuse_one, inputs))
    return FusedViews(np.stack([step.fused for step in steps]),
                      np.array([np.mean(step.sources == NETWORK) for step in steps]))


def fusion_inputs(x0: torch.Tensor, x1: torch.Tensor, field: torch.Tensor, *,
                  runs: tuple[dict, ...] | None = None) -> list[ViewInputs]:
    """What :func:`fuse_with_sgbm` (same arguments) hands :func:`fuse_view` for each of the
    ``2B`` views (left views first): :func:`view_inputs` on tensors."""
    return view_inputs(image_batch.uint8_images(x0), image_batch.uint8_images(x1),
                       field.detach().float().cpu().numpy(), runs=runs,
                       consistent=_consistent(field))


def _consistent(field: torch.Tensor) -> np.ndarray:
    """The consistency mask ``[2B, H, W]`` bool of the fields ``[2B, H, W, 2]`` at
    :data:`FUSION_CONSISTENCY_PX`, by torch's ``grid_sample`` (several times faster than
    :mod:`crossview.geometry.consistency_arrays`, whose masks it equals where torch's CPU
    kernels use fused multiply-adds)."""
    return tensor_consistency.noc_mask(field.detach().float(), FUSION_CONSISTENCY_PX).cpu().numpy()


def view_inputs(images0: Sequence[np.ndarray], images1: Sequence[np.ndarray],
                field: np.ndarray, *, runs: tuple[dict, ...] | None = None,
                consistent: np.ndarray | None = None) -> list[ViewInputs]:
    """What :func:`fused_disparities` (same arguments) hands :func:`fuse_view` for each of the
    ``2B`` views (left views first): the network's disparity and consistency (``consistent
    [2B, H, W]`` bool if given, else :func:`crossview.geometry.consistency_arrays.noc_mask`
    at :data:`FUSION_CONSISTENCY_PX`), SGBM's checked disparity after step 1's ``runs``
    (step 0's toning included), the view's image."""
    b = len(images0)
    runs = FUSION_SGBM_RUNS if runs is None else runs
    if not runs:
        raise ValueError("runs must name at least one SGBM run")
    if len(images1) != b or field.shape[0] != 2 * b or field.shape[1:3] != images0[0].shape[:2]:
        raise ValueError(f"field must be [2B, H, W, 2] for {b} pair(s) of images "
                         f"{images0[0].shape[:2]} (H, W), got {field.shape=}")
    if consistent is None:
        consistent = noc_mask(field, FUSION_CONSISTENCY_PX)
    elif consistent.shape != field.shape[:3]:
        raise ValueError(f"consistent must be [2B, H, W] as the field, got {consistent.shape=}")
    network = np.concatenate([field_to_disparity(field[:b]),
                              field_to_disparity(field[b:], "right")])
    images = [*images0, *images1]  # row r's view
    searches = [sgbm_num_disparities(float(max(network[i].max(), network[b + i].max())))
                for i in range(b)]

    def matching_images(image: np.ndarray) -> list[np.ndarray]:  # what each run matches
        return [rank_matching_image(image, **run) if run else image for run in runs]

    def sgbm_view(job: int) -> np.ndarray:
        run, row = divmod(job, 2 * b)
        left, right = pairs[run][row % b]
        matcher = sgbm_disparity if row < b else sgbm_right_disparity
        return matcher(left, right, searches[row % b], pad=True,
                       uniqueness=FUSION_SGBM_UNIQUENESS)

    def inputs_one(row: int) -> ViewInputs:
        view, other = ("left", row + b) if row < b else ("right", row - b)
        checked = np.full(network[row].shape, np.nan, np.float32)
        for run in classical:  # each run fills the holes that the runs before it left
            checked = np.where(np.isfinite(checked), checked,
                               left_right_checked(run[row], run[other], FUSION_SGBM_CHECK_PX,
                                                  view))
        return ViewInputs(network[row], consistent[row], checked, images[row], view)

    # OpenCV and numpy release the GIL: the views run side by side, OpenCV's threads shared;
    # the left images' rank transforms while the right ones are toned
    workers = min(2 * b * len(runs), FUSION_THREADS)
    with ThreadPoolExecutor(max_workers=workers) as pool:
        lefts = [pool.submit(matching_images, image) for image in images0]
        toned1 = [right_toned_to_left(images0[i], images1[i], network[i], consistent[i],
                                      TONE_MATCH_MIN_GREY) for i in range(b)]
        rights = list(pool.map(matching_images, toned1))
        pairs = [[(lefts[i].result()[run], rights[i][run]) for i in range(b)]
                 for run in range(len(runs))]  # each run's pairs
        with shared_opencv_threads(workers):
            maps = list(pool.map(sgbm_view, range(2 * b * len(pairs))))
        classical = [maps[run * 2 * b:(run + 1) * 2 * b] for run in range(len(pairs))]
        return list(pool.map(inputs_one, range(2 * b)))
