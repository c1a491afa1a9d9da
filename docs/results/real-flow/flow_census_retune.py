"""The flow fusion's consistency threshold and census window chosen again for its four
candidates (issue 50, item 5).

The threshold (0.5 px: a candidate counts where its own forward-backward error is at most
that) was chosen for the forward-backward rule before the census choice
(``flow_dis_fusion.py``), the census window (9 px) for the census choice among three
candidates (``flow_census_choice.py``); since then DIS runs a third time, started from the
choice (``flow_census_init.py``). On the pairs ``flow_census_choice.py record`` cached (142:
the real-train and real-dev stereo scenes as flow at their own size and enlarged 2 and 3
times, KITTI's flow pair, Motorcycle, 32 synthetic street pairs), per setting ``t{T}w{W}``
(threshold ``T`` px in :data:`THRESHOLDS`, window ``W`` px in :data:`WINDOWS`) the fusion as
shipped with those two values: the census choice among the network's fields and DIS's runs
on the grey and rank frames, DIS started from that choice, the census choice among the four
(:func:`crossview.models.dense.dis_fusion.census_choice`), then the forward flow polished as the
fusion polishes it (:func:`crossview.models.dense.dis_fusion.polished`). ``t0.5w9`` is the
shipped setting. ``score --tiers`` scores the tiered rule instead, ``tier{T}`` (window 9 px,
``T`` in :data:`TIERS`): per pixel the census choice among the candidates consistent within
0.5 px as shipped, where none is among those consistent within ``T`` px, where none is the
network's (:func:`crossview.models.dense.dis_fusion.census_choice` with ``second_tier=T``, as
the fusion chooses since; DIS's restart starts from the same rule's choice among the first
three). Score: EPE of the forward flow on the known pixels at the pair's size; the
JSON (``{pair: {"root", "factor", "motion_max", "dis", "default", setting + "+": EPE}}``,
written after every pair; a rerun skips the pairs it holds; the grid and the tiers in two
JSON files) is read by ``choose`` (the rows of the tables given merged per pair)
(``flow_census_choice.choose``: the leave-one-group-out choice over the real-train pairs, then
per kind; the pairs ahead of DIS among the 104 moving 100 px and more).

Run (``--part I/N`` splits the pairs over processes)::

    OMP_NUM_THREADS=1 python docs/results/real-flow/flow_census_retune.py score \\
        /tmp/flow-cache docs/results/real-flow/flow_census_retune.json \\
        ../shared/real-train ../shared/real-dev
    OMP_NUM_THREADS=1 python docs/results/real-flow/flow_census_retune.py score --tiers \\
        /tmp/flow-cache docs/results/real-flow/flow_census_retune_tiers.json \\
        ../shared/real-train ../shared/real-dev
    python docs/results/real-flow/flow_census_retune.py choose \\
        docs/results/real-flow/flow_census_retune.json \\
        docs/results/real-flow/flow_census_retune_tiers.json ../shared/real-train
"""

from __future__ import annotations

import sys
from functools import partial
from itertools import product
from pathlib import Path

import numpy as np

from crossview.geometry.census_arrays import census_codes
from crossview.models.dense.dis_fusion import census_choice, polished

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

THRESHOLDS = (0.5, 1.0, 2.0, 4.0, 8.0)
WINDOWS = (9, 13)
SETTINGS = tuple(f"t{t:g}w{w}" for t, w in product(THRESHOLDS, WINDOWS))
TIERS = (1.0, 2.0, 4.0)


def score_pair(data: dict, frame0: np.ndarray, frame1: np.ndarray, truth: np.ndarray,
               known: np.ndarray, tiers: bool = False) -> dict:
    """The JSON row of one cached pair (module docstring): the threshold and window grid, or
    with ``tiers`` the tiered rule."""
    first, second = data["frame0"], data["frame1"]
    codes = [census_codes(first), census_codes(second)]
    three = [data["field"], *dis_runs(first, second)]
    row = cached_row(data, frame0, frame1, truth, known)
    rules = ({f"tier{tier:g}": partial(census_choice, second_tier=tier) for tier in TIERS}
             if tiers
             else {name: partial(census_choice, threshold=threshold, window=window)
                   for (threshold, window), name in zip(product(THRESHOLDS, WINDOWS), SETTINGS,
                                                        strict=True)})
    for name, rule in rules.items():
        four = [*three, started_from(first, second, rule(three, codes))]
        flow = rule(four, codes)[0]
        row[f"{name}+"] = epe(at_size(polished(flow, first, second), truth.shape[:2]), truth,
                              known)
    return row


def main() -> None:
    parser, steps = scoring_steps(__doc__.splitlines()[0])
    steps.choices["score"].add_argument("--tiers", action="store_true",
                                        help="score the tiered rule (module docstring)")
    args = parser.parse_args()
    if args.step == "score":
        score(args.cache, args.out, args.roots, part(args),
              partial(score_pair, tiers=args.tiers))
    else:
        choose(args.tables, args.train_root)
        large_motions(args.tables, (*SETTINGS, *(f"tier{tier:g}" for tier in TIERS)))


if __name__ == "__main__":
    main()
