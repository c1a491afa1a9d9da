"""A flow network's fields fused with OpenCV DIS's: per pixel the consistent flow whose
matches look most alike.

The two fail in different places: the network where its training held few motions like the
pair's (large ones, weak texture), DIS (:func:`crossview.models.dense.classical.dis_flow`) at
occlusions and on thin structures. Both run in both directions, DIS three times
(:data:`FLOW_DIS_RUNS`): on the grey frames, on their rank transforms
(:func:`crossview.models.dense.rank_transform.rank_transform`), which hold where the two frames'
brightness differs, and last on the grey frames again, started from the choice among the flows
before it (:data:`DIS_FROM_CHOICE`): the network's large motions carried into DIS's own search,
which from zero loses them. Per pixel of each direction the fusion keeps, among the
candidates whose own forward-backward error
(:func:`crossview.geometry.consistency.consistency_error`) is at most
:data:`FUSION_DIS_FB_PX`, the one whose matches look most alike: the lowest census cost
(:func:`crossview.geometry.census_arrays.census_cost`) over :data:`FLOW_CENSUS_WINDOW` px
square; where none is, the same among those within :data:`FLOW_SECOND_TIER_PX`; the network's
where no candidate is (:func:`census_choice`). Around the
motion edges of the result, each direction then takes the colour-weighted median of its frame
(:func:`crossview.geometry.edge_weighted_median.edge_weighted_median_flow`, the stereo fusion's
:data:`~crossview.models.dense.sgbm_fusion.EDGE_MEDIANS` passes), which puts motion edges on
colour edges. Last, each direction is polished by OpenCV's variational refinement
(:func:`crossview.models.dense.classical.variational_refinement`, :data:`FLOW_VARIATIONAL`),
the energy DIS itself ends each scale with: the network's and the median's flow carry no
smoothness term at full resolution. No ground truth is read; the rule, its threshold and window,
the median's passes and the refinement's settings were chosen by leave-one-group-out on real
scenes used as flow pairs (docs/real-eval.md, ``docs/results/real-flow/flow_dis_fusion.py``,
``flow_rank_dis.py``, ``flow_edge_median.py``, ``flow_variational.py``,
``flow_census_choice.py``, ``flow_census_init.py``, ``flow_census_retune.py`` there).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from functools import partial

import numpy as np
import torch

from crossview.data.image_batch import uint8_images
from crossview.geometry.census_arrays import census_codes, census_cost
from crossview.geometry.consistency import consistency_error
from crossview.geometry.edge_weighted_median import edge_weighted_median_flow
from crossview.models.dense.classical import dis_flow, grey_image, variational_refinement
from crossview.models.dense.opencv_threads import shared_opencv_threads
from crossview.models.dense.rank_transform import rank_transform
from crossview.models.dense.sgbm_fusion import EDGE_MEDIANS, FUSION_THREADS

# chosen by leave-one-group-out over {0, 0.5, 1, 2, 4} px, two rules (docs/real-eval.md)
FUSION_DIS_FB_PX = 0.5
# px: where no candidate is consistent within FUSION_DIS_FB_PX, the census choice among those
# consistent within this (the second tier); chosen by leave-one-group-out over {1, 2, 4} px and
# none (15 of 17 folds; docs/results/real-flow/flow_census_retune.py)
FLOW_SECOND_TIER_PX = 2.0
# px: the census cost's window, chosen by leave-one-group-out over {5, 9, 15, 25} and the
# forward-backward rule before it (9 in 16 of 17 folds;
# docs/results/real-flow/flow_census_choice.py)
FLOW_CENSUS_WINDOW = 9
# the DIS run on the grey frames that starts from the census choice among the candidates
# before it (the network's and the runs' before it), not from zero
DIS_FROM_CHOICE = "choice"
# DIS's runs: on the grey frames (None), on their rank transforms of this radius, or
# DIS_FROM_CHOICE; the first two chosen (with the forward-backward rule before the census) by
# leave-one-group-out over {grey}, {rank r}, {rank r, grey}, {grey, rank r} for r in {2, 3, 5}
# (docs/results/real-flow/flow_rank_dis.py), the third by leave-one-group-out against none and
# DIS started from the network's fields (17 of 17 folds;
# docs/results/real-flow/flow_census_init.py)
FLOW_DIS_RUNS: tuple[int | str | None, ...] = (None, 2, DIS_FROM_CHOICE)
# the stereo fusion's two passes, chosen by leave-one-group-out over them and 12 single passes
# (docs/results/real-flow/flow_edge_median.py)
FLOW_EDGE_MEDIANS = EDGE_MEDIANS
# chosen by leave-one-group-out among the 33 of 43 settings (iterations, weights, before or
# after the medians) within 10 x 5 iterations (docs/results/real-flow/flow_variational.py)
FLOW_VARIATIONAL = {"iterations": 10, "sor_iterations": 5, "alpha": 40.0, "delta": 1.0,
                    "gamma": 20.0}


def census_choice(candidates: Sequence[np.ndarray], codes: Sequence[np.ndarray], *,
                  threshold: float = FUSION_DIS_FB_PX,
                  window: int = FLOW_CENSUS_WINDOW,
                  second_tier: float | None = None) -> np.ndarray:
    """Per pixel of each direction, among the ``candidates`` (both directions' flows ``[2B, H,
    W, 2]`` float32 each, the network's first) whose own forward-backward error is at most
    ``threshold`` px, the one with the lowest census cost over ``window`` px square (ties: the
    earlier); where none is and ``second_tier`` is given, the same among those within
    ``second_tier`` px (the fusion's :data:`FLOW_SECOND_TIER_PX`); the first's where none is ->
    ``[2B, H, W, 2]``. ``codes``: each row's first frame's
    :func:`crossview.geometry.census_arrays.census_codes` (the first frames, then the
    second)."""
    tiers = (threshold,) if second_tier is None else (threshold, second_tier)
    return _chosen(candidates, [_choice_cost(c, codes, window) for c in candidates], tiers)


def _choice_cost(candidate: np.ndarray, codes: Sequence[np.ndarray], window: int,
                 mapper: Callable = map) -> tuple[np.ndarray, np.ndarray]:
    """What :func:`census_choice` ranks ``candidate [2B, H, W, 2]`` by: its census cost ``[2B,
    H, W]`` (finite: matches out of view are clipped into it) and its own forward-backward
    error ``[2B, H, W]`` px; ``mapper`` maps the cost over the rows
    (:func:`~crossview.geometry.census_arrays.census_cost`)."""
    error = consistency_error(torch.from_numpy(candidate))[0].numpy()
    return census_cost(codes, candidate, window, vertical=True, mapper=mapper), error


def _chosen(candidates: Sequence[np.ndarray], costs: Sequence[tuple[np.ndarray, np.ndarray]],
            tiers: Sequence[float]) -> np.ndarray:
    """Per pixel the candidate ``[2B, H, W, 2]`` of the lowest census cost among those whose
    error is within the first of ``tiers`` (px) that holds any (ties: the earlier), the first
    candidate where none does; ``costs``: each candidate's ``(cost, error)``, ``[2B, H, W]``
    each -> ``[2B, H, W, 2]``."""
    cost = np.stack([c for c, _ in costs])  # [C, 2B, H, W]
    error = np.stack([e for _, e in costs])
    masked = np.where(error <= tiers[0], cost, np.inf)
    found = np.isfinite(masked).any(0)
    best = np.where(found, masked.argmin(0), 0)
    for tier in tiers[1:]:  # only on the pixels the tiers before left open
        at = np.nonzero(~found)
        masked = np.where(error[(slice(None), *at)] <= tier, cost[(slice(None), *at)], np.inf)
        here = np.isfinite(masked).any(0)
        decided = tuple(index[here] for index in at)
        best[decided] = masked.argmin(0)[here]
        found[decided] = True
    return _picked(candidates, best)


def _picked(candidates: Sequence[np.ndarray], best: np.ndarray) -> np.ndarray:
    """Per pixel the candidate ``[2B, H, W, 2]`` that ``best [2B, H, W]`` (indices into
    ``candidates``) names, written in place of the first (no stack of them all)."""
    chosen = candidates[0].copy()
    for index, candidate in enumerate(candidates[1:], 1):
        np.copyto(chosen, candidate, where=(best == index)[..., None])
    return chosen


def polished(flow: np.ndarray, first: np.ndarray, second: np.ndarray, *,
             medians: tuple[dict, ...] | None = None) -> np.ndarray:
    """One direction's fused flow ``[H, W, 2]`` (``first`` to ``second``, RGB uint8 ``[H, W,
    3]``) after the edge medians (``None``: :data:`FLOW_EDGE_MEDIANS`) and the variational
    refinement (:data:`FLOW_VARIATIONAL`)."""
    for settings in FLOW_EDGE_MEDIANS if medians is None else medians:
        flow = edge_weighted_median_flow(flow, first, **settings)
    return variational_refinement(flow, first, second, **FLOW_VARIATIONAL)


def fuse_with_dis(x0: torch.Tensor, x1: torch.Tensor, field: torch.Tensor, *,
                  runs: tuple[int | str | None, ...] | None = None,
                  medians: tuple[dict, ...] | None = None) -> torch.Tensor:
    """Both directions' flow fields fused with DIS's.

    Args:
        x0, x1: the first and second frames ``[B, 3, H, W]``, 0..255 (rounded to uint8 for
            DIS).
        field: the network's fields ``[2B, H, W, 2]`` (forward rows first, then backward), as
            :func:`crossview.models.dense.inference.predict_fields` holds them.
        runs: DIS's runs, in order (at least one; ``None``: :data:`FLOW_DIS_RUNS`): ``None``
            (the grey frames), a rank transform's radius, or :data:`DIS_FROM_CHOICE`.
        medians: the median passes, in order (``()`` for none; ``None``:
            :data:`FLOW_EDGE_MEDIANS`).

    Returns:
        The fused fields ``[2B, H, W, 2]`` after the edge medians and the variational
        refinement, on ``field``'s device and dtype.
    """
    b = x0.shape[0]
    runs = FLOW_DIS_RUNS if runs is None else runs
    if not runs:
        raise ValueError("runs must name at least one DIS run")
    unknown = [run for run in runs if not (run is None or run == DIS_FROM_CHOICE
                                           or (isinstance(run, int) and run > 0))]
    if unknown:
        raise ValueError(f"runs are None, a rank radius > 0 or {DIS_FROM_CHOICE!r}, got "
                         f"{unknown}")
    if field.shape[0] != 2 * b or field.shape[1:3] != x0.shape[-2:]:
        raise ValueError(f"field must be [2B, H, W, 2] for frames {tuple(x0.shape)}, "
                         f"got {field.shape=}")
    frames0, frames1 = uint8_images(x0), uint8_images(x1)
    firsts, seconds = frames0 + frames1, frames1 + frames0  # row r's frames
    tiers = (FUSION_DIS_FB_PX, FLOW_SECOND_TIER_PX)

    def dis_inputs(run: int | str | None) -> tuple[list, ...]:
        """Row r's first and second frames as one DIS run sees them (and where it starts)."""
        if run is None:
            return firsts, seconds
        if run == DIS_FROM_CHOICE:
            return firsts, seconds, list(_chosen(candidates, costs, tiers))
        ranked0, ranked1 = ([rank_transform(grey_image(f), run) for f in frames]
                            for frames in (frames0, frames1))
        return ranked0 + ranked1, ranked1 + ranked0

    # OpenCV and numpy release the GIL: the directions run side by side, OpenCV's threads shared
    workers = min(2 * b, FUSION_THREADS)
    with ThreadPoolExecutor(max_workers=workers) as pool, shared_opencv_threads(workers):
        codes = list(pool.map(census_codes, firsts))
        candidates = [field.float().cpu().numpy()]
        costs = [_choice_cost(candidates[0], codes, FLOW_CENSUS_WINDOW, pool.map)]
        for run in runs:  # each candidate's cost once: a run may start from the choice so far
            candidates.append(np.stack(list(pool.map(dis_flow, *dis_inputs(run)))))
            costs.append(_choice_cost(candidates[-1], codes, FLOW_CENSUS_WINDOW, pool.map))
        fused = np.stack(list(pool.map(partial(polished, medians=medians),
                                       _chosen(candidates, costs, tiers), firsts, seconds)))
    return torch.from_numpy(fused).to(field)
