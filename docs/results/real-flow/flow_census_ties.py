"""Near-ties in the flow fusion's census choice: the network's or DIS's (issue 50, item 5).

The flow default falls behind DIS on seven of the 104 large-motion pairs (large-motion.md),
five of them synthetic streets and Monopoly enlarged, where DIS alone (on the grey frames, from
zero) beats every mixture the fusion makes (``flow_census_choice.json``: street300_09 25.7 px
for DIS, 38.2 for the census choice). Their losing areas are weakly textured (sky, road, the
board): every candidate's matches look alike there, the census costs are near-equal, and the
choice goes to the lowest cost or, on equal costs, to the earlier candidate, the network. Does
preferring DIS's smooth flow where the costs are nearly tied choose better?

On the pairs ``flow_census_choice.py record`` cached (``/tmp/flow-cache``), per setting
``m{M}{order}``: the fusion as shipped (the tiered census choice among the network's fields and
DIS's runs on the grey and rank frames, DIS started from that choice, the tiered choice among
the four, then the forward flow polished as the fusion polishes it), except that per pixel,
among the candidates consistent within the tier whose census cost is within ``M`` bits of the
lowest there (:data:`MARGINS`), the first in ``order`` is kept: ``net`` (the network, then
DIS's runs in order: with ``M`` = 0 exactly the shipped rule, ``m0net``, checked equal to it)
or ``dis`` (DIS started from the choice, DIS grey, DIS rank, the network). Where no candidate is
consistent within 2 px the network's stays, as shipped. Score: EPE of the forward flow on the
known pixels at the pair's size; JSON rows as ``flow_census_retune.py``'s; ``choose``: the
leave-one-group-out choice over the real-train pairs, the means per kind and the large motions.

Run (``--part I/N`` splits the pairs over processes)::

    OMP_NUM_THREADS=1 python docs/results/real-flow/flow_census_ties.py score \\
        /tmp/flow-cache OUT.json ../shared/real-train ../shared/real-dev --part I/2
    python docs/results/real-flow/flow_census_ties.py choose OUT_0.json OUT_1.json \\
        ../shared/real-train
"""

from __future__ import annotations

import sys
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from crossview.geometry.census_arrays import census_codes
from crossview.models.dense.dis_fusion import (
    FLOW_CENSUS_WINDOW,
    FLOW_SECOND_TIER_PX,
    FUSION_DIS_FB_PX,
    _choice_cost,
    census_choice,
    polished,
)

sys.path.insert(0, str(Path(__file__).parent))
sys.path.insert(1, str(Path(__file__).parents[1] / "real-stereo"))  # the stereo studies' helpers
from flow_census_choice import (
    at_size,
    cached_row,
    choose,
    dis_runs,
    part,
    score,
    scoring_steps,
)
from flow_census_init import large_motions, started_from
from flow_dis_fusion import epe

MARGINS = (0.0, 0.25, 0.5, 1.0, 2.0)
# candidate indices in the order a near-tie goes: the network (0), DIS grey (1), DIS rank (2),
# DIS started from the choice (3; absent while that run's start is chosen)
ORDERS = {"net": (0, 1, 2, 3), "dis": (3, 1, 2, 0)}
SETTINGS = tuple(f"m{margin:g}{order}" for order in ORDERS for margin in MARGINS
                 if (margin, order) != (0.0, "dis"))
TIERS = (FUSION_DIS_FB_PX, FLOW_SECOND_TIER_PX)


def near_tie_choice(candidates: Sequence[np.ndarray],
                    costs: Sequence[tuple[np.ndarray, np.ndarray]], margin: float,
                    order: Sequence[int]) -> np.ndarray:
    """Per pixel, tier by tier (:data:`TIERS`, the second only where the first holds no
    consistent candidate), among the consistent candidates whose census cost is within
    ``margin`` of the lowest, the first of ``order`` (indices into ``candidates``, those
    present); the first candidate where none is consistent within the last tier. ``candidates``
    ``[2, H, W, 2]`` each, ``costs`` their ``(cost, error)`` ``[2, H, W]`` -> ``[2, H, W, 2]``."""
    order = [i for i in order if i < len(candidates)]
    cost = np.stack([c for c, _ in costs])
    error = np.stack([e for _, e in costs])
    best = np.zeros(cost.shape[1:], np.intp)
    open_ = np.ones(cost.shape[1:], bool)
    for tier in TIERS:
        eligible = (error <= tier) & open_
        lowest = np.where(eligible, cost, np.inf).min(0)
        near = eligible & (cost <= lowest + margin)
        for index in reversed(order):  # the first of order wins: written last
            best = np.where(near[index], index, best)
        open_ &= ~eligible.any(0)
    return np.take_along_axis(np.stack(candidates), best[None, ..., None], 0)[0]


def score_pair(data: dict, frame0: np.ndarray, frame1: np.ndarray, truth: np.ndarray,
               known: np.ndarray) -> dict:
    """The JSON row of one cached pair (module docstring)."""
    first, second = data["frame0"], data["frame1"]
    codes = [census_codes(first), census_codes(second)]
    three = [data["field"], *dis_runs(first, second)]
    costs = [_choice_cost(c, codes, FLOW_CENSUS_WINDOW) for c in three]
    row = cached_row(data, frame0, frame1, truth, known)
    for name in SETTINGS:
        margin, order = float(name[1:-3]), ORDERS[name[-3:]]
        restart = started_from(first, second, near_tie_choice(three, costs, margin, order))
        four, four_costs = [*three, restart], [*costs, _choice_cost(restart, codes,
                                                                     FLOW_CENSUS_WINDOW)]
        flow = near_tie_choice(four, four_costs, margin, order)
        if name == "m0net" and not np.array_equal(
                flow, census_choice(four, codes, second_tier=FLOW_SECOND_TIER_PX)):
            raise RuntimeError("m0net is not the shipped rule")
        row[f"{name}+"] = epe(at_size(polished(flow[0], first, second), truth.shape[:2]),
                              truth, known)
    return row


def main() -> None:
    parser, _ = scoring_steps(__doc__.splitlines()[0])
    args = parser.parse_args()
    if args.step == "score":
        score(args.cache, args.out, args.roots, part(args), score_pair)
    else:
        choose(args.tables, args.train_root)
        large_motions(args.tables, SETTINGS)


if __name__ == "__main__":
    main()
