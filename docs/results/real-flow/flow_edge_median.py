"""The colour-weighted median at the motion edges of the fused flow, per real pair: which
passes, if any, chosen by leave-one-group-out.

Pairs as ``flow_dis_fusion.py`` (the stereo scenes of the given roots as flow pairs, the KITTI
flow scene, Motorcycle). For each pair, ``matchflow-hybrid``'s network (both directions, no
fusion) and DIS medium are fused by the shipped forward-backward rule
(``flow_dis_fusion.forward_backward_choice``); then the forward flow is
scored by EPE as it is (``fused``), after one pass of
:func:`crossview.geometry.edge_weighted_median.edge_weighted_median_flow` (``wm_j{jump}_r{radius}
_s{step}_c{sigma}``, band 2 px) or after the stereo fusion's two passes (``wm2_stereo``,
:data:`crossview.models.dense.sgbm_fusion.EDGE_MEDIANS`). The JSON holds ``{pair: {"root": ...,
setting: EPE}}``; the real-train pairs' groups give the leave-one-group-out choice printed.

Run: ``OMP_NUM_THREADS=2 python docs/results/real-flow/flow_edge_median.py OUT.json
../shared/real-dev ../shared/real-train``
"""

from __future__ import annotations

import itertools
import sys
from pathlib import Path

from crossview.geometry.edge_weighted_median import edge_weighted_median_flow
from crossview.models.dense.sgbm_fusion import EDGE_MEDIANS
from crossview.report import write_json

sys.path.insert(0, str(Path(__file__).parent))
from flow_dis_fusion import epe, fused_pairs, print_choice  # the fusion study's pairs, score

PASSES: dict[str, tuple[dict, ...]] = {"fused": ()}
for jump, (radius, step), sigma in itertools.product((1.0, 2.0), ((4, 2), (12, 6), (8, 2)),
                                                     (10.0, 20.0)):
    PASSES[f"wm_j{jump:g}_r{radius}_s{step}_c{sigma:g}"] = (
        {"jump": jump, "width": 2, "radius": radius, "step": step, "sigma_colour": sigma},)
PASSES["wm2_stereo"] = EDGE_MEDIANS


def main(out: Path, roots: list[str]) -> None:
    table: dict[str, dict] = {}
    for root, name, frame0, _, truth, known, network, dis, fused in fused_pairs(roots):
        scores = {"net": epe(network[0].numpy(), truth, known), "dis": epe(dis[0].numpy(), truth,
                                                                            known)}
        for setting, passes in PASSES.items():
            flow = fused
            for settings in passes:
                flow = edge_weighted_median_flow(flow, frame0, **settings)
            scores[setting] = epe(flow, truth, known)
        table[name] = {"root": root, **scores}
        print(name, {k: round(v, 4) for k, v in scores.items()
                     if k in ("net", "dis", "fused", "wm2_stereo")}, flush=True)
        write_json(out, table)
    print_choice(table, roots, list(PASSES), digits=4)


if __name__ == "__main__":
    main(Path(sys.argv[1]), sys.argv[2:])
