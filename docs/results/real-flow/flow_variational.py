"""OpenCV's variational refinement after the DIS fusion and the edge medians, per real pair:
which settings, if any, chosen by leave-one-group-out.

Pairs as ``flow_dis_fusion.py`` (the stereo scenes of the given roots as flow pairs, the KITTI
flow scene, Motorcycle). For each pair, ``matchflow-hybrid``'s network (both directions, no
fusion) and DIS medium are fused by the shipped forward-backward rule
(``flow_dis_fusion.forward_backward_choice``) and the shipped edge
medians (:data:`~crossview.models.dense.dis_fusion.FLOW_EDGE_MEDIANS`); the forward flow is
scored by EPE as it is (``fused``) and after
:func:`crossview.models.dense.classical.variational_refinement` with each of :data:`SETTINGS`
(``v_i{iterations}_s{sor}_a{alpha}_d{delta}_g{gamma}``; ``_before``: the refinement before the
medians instead of after). The grid is the union of three rounds (iterations and weights
first, then around the best). The JSON holds ``{pair: {"root": ..., setting: EPE}}``; the
real-train pairs' groups give the leave-one-group-out choice printed, among all settings and
among those within the time budget (:data:`BUDGET`: at most 10 x 5 iterations, about 0.16 s
a direction of a 375x1241 pair on 2 cores; 20 x 10 take 0.35 s).

Run: ``OMP_NUM_THREADS=2 python docs/results/real-flow/flow_variational.py OUT.json
../shared/real-dev ../shared/real-train``
"""

from __future__ import annotations

import itertools
import sys
from pathlib import Path

import numpy as np

from crossview.geometry.edge_weighted_median import edge_weighted_median_flow
from crossview.models.dense.classical import variational_refinement
from crossview.models.dense.dis_fusion import FLOW_EDGE_MEDIANS
from crossview.report import write_json

sys.path.insert(0, str(Path(__file__).parent))
from flow_dis_fusion import epe, fused_pairs, print_choice  # the fusion study's pairs, score

# (iterations, sor_iterations, alpha, delta, gamma, before the medians)
GRID = {(i, 5, a, 5.0, 10.0, False) for i, a in itertools.product((1, 5), (10.0, 20.0, 40.0))}
GRID |= {(5, 5, 20.0, 5.0, 0.0, False)}
GRID |= {(i, s, 20.0, 5.0, g, False)
         for i, s, g in itertools.product((5, 10, 20), (5, 10), (5.0, 10.0, 20.0))}
GRID |= {(10, 5, a, 5.0, 10.0, False) for a in (10.0, 40.0)}
GRID |= {(10, 5, 20.0, d, 10.0, False) for d in (2.0, 10.0)}
GRID |= {(i, 5, 20.0, 5.0, 10.0, True) for i in (5, 10)}
GRID |= {(10, 5, a, d, g, False)
         for d, g, a in itertools.product((1.0, 2.0), (5.0, 10.0, 20.0), (20.0, 40.0))}
GRID |= {(20, 10, 20.0, 2.0, 10.0, False), (5, 5, 20.0, 2.0, 10.0, False)}
BUDGET = 50  # fixed-point x SOR iterations
SETTINGS = {f"v_i{i}_s{s}_a{a:g}_d{d:g}_g{g:g}" + ("_before" if before else ""):
            (i, s, a, d, g, before) for i, s, a, d, g, before in sorted(GRID)}


def medians(flow: np.ndarray, frame: np.ndarray) -> np.ndarray:
    for settings in FLOW_EDGE_MEDIANS:
        flow = edge_weighted_median_flow(flow, frame, **settings)
    return flow


def main(out: Path, roots: list[str]) -> None:
    table: dict[str, dict] = {}
    for root, name, frame0, frame1, truth, known, _, _, choice in fused_pairs(roots):
        fused = medians(choice, frame0)
        scores = {"fused": epe(fused, truth, known)}
        for setting, (i, s, a, d, g, before) in SETTINGS.items():
            weights = {"iterations": i, "sor_iterations": s, "alpha": a, "delta": d, "gamma": g}
            flow = (medians(variational_refinement(choice, frame0, frame1, **weights), frame0)
                    if before else variational_refinement(fused, frame0, frame1, **weights))
            scores[setting] = epe(flow, truth, known)
        table[name] = {"root": root, **scores}
        best = min(SETTINGS, key=scores.get)
        print(name, {"fused": round(scores["fused"], 4), best: round(scores[best], 4)},
              flush=True)
        write_json(out, table)
    print(len(SETTINGS), "settings; all:")
    print_choice(table, roots, ["fused", *SETTINGS], digits=4)
    print(f"within {BUDGET} iterations:")
    within = [k for k, v in SETTINGS.items() if v[0] * v[1] <= BUDGET]
    print_choice(table, roots, ["fused", *within], digits=4)


if __name__ == "__main__":
    main(Path(sys.argv[1]), sys.argv[2:])
