"""DIS on rank-transformed frames in the flow fusion: whether, with which window, and before or
after DIS on the grey frames, chosen by leave-one-group-out on real-train pairs.

Pairs as ``flow_dis_fusion.py`` (the stereo scenes of the given roots as flow pairs, the KITTI
flow scene, Motorcycle). For each pair, ``matchflow-hybrid``'s network (both directions, no
fusion) is fused by the forward-backward rule
(``flow_dis_fusion.forward_backward_choice``) with DIS's flows in the order
of each setting, then polished as the fusion polishes (edge medians, variational refinement);
the forward flow is scored by EPE:

- ``grey``: DIS on the grey frames (the fusion before this study);
- ``rank{r}``: DIS on the frames' rank transforms of radius ``r`` instead;
- ``rank{r}+grey`` / ``grey+rank{r}``: both, in that order (each run takes the pixels where what
  the runs before it left fails the check and it passes).

When this study ran (round nine) the shipped setting's forward flow was checked to be the
default run's (``crossview.estimate_flow``); the default has since chosen by the census cost
(``flow_census_choice.py``) and added a third DIS run (``flow_census_init.py``), so the study
now replays round nine's rule as it was, without that check. The JSON holds ``{pair:
{"root": ..., setting: EPE}}``; the real-train pairs' groups give the leave-one-group-out
choice printed.

Run: ``OMP_NUM_THREADS=2 python docs/results/real-flow/flow_rank_dis.py OUT.json ../shared/real-dev
../shared/real-train``
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import torch

import crossview
from crossview.geometry.edge_weighted_median import edge_weighted_median_flow
from crossview.models.dense.classical import dis_flow, grey_image, variational_refinement
from crossview.models.dense.dis_fusion import FLOW_EDGE_MEDIANS, FLOW_VARIATIONAL
from crossview.models.dense.rank_transform import rank_transform
from crossview.report import write_json

sys.path.insert(0, str(Path(__file__).parent))
from flow_dis_fusion import epe, forward_backward_choice, network_and_dis, pairs, print_choice

RADII = (2, 3, 5)


def setting_runs() -> dict[str, tuple[int | None, ...]]:
    """``{setting: FLOW_DIS_RUNS}`` of the grid above."""
    runs: dict[str, tuple[int | None, ...]] = {"grey": (None,)}
    for radius in RADII:
        runs[f"rank{radius}"] = (radius,)
        runs[f"rank{radius}+grey"] = (radius, None)
        runs[f"grey+rank{radius}"] = (None, radius)
    return runs


def forward_flow(network: torch.Tensor, dis: dict[int | None, torch.Tensor],
                 runs: tuple[int | None, ...], frame0: np.ndarray,
                 frame1: np.ndarray) -> np.ndarray:
    """The fusion's forward flow ``[H, W, 2]`` with DIS's runs ``runs`` (both directions'
    fields ``[2, H, W, 2]`` of the network and of each DIS run in ``dis``)."""
    fused = network
    for radius in runs:
        fused = forward_backward_choice(fused, dis[radius])
    flow = fused[0].numpy()
    for settings in FLOW_EDGE_MEDIANS:
        flow = edge_weighted_median_flow(flow, frame0, **settings)
    return variational_refinement(flow, frame0, frame1, **FLOW_VARIATIONAL)


def main(out: Path, roots: list[str]) -> None:
    model = crossview.load_model("matchflow-hybrid")
    table: dict[str, dict] = {}
    for root, name, frame0, frame1, truth, known in pairs(roots):
        network, grey_dis = network_and_dis(model, frame0, frame1)
        dis = {None: grey_dis}
        for radius in RADII:
            rank0, rank1 = (rank_transform(grey_image(f), radius) for f in (frame0, frame1))
            dis[radius] = torch.from_numpy(np.stack([dis_flow(rank0, rank1),
                                                     dis_flow(rank1, rank0)]))
        flows = {setting: forward_flow(network, dis, runs, frame0, frame1)
                 for setting, runs in setting_runs().items()}
        table[name] = {"root": root, **{setting: epe(flow, truth, known)
                                        for setting, flow in flows.items()}}
        print(name, {k: round(v, 3) for k, v in table[name].items() if k != "root"}, flush=True)
        write_json(out, table)
    print_choice(table, roots, list(setting_runs()))


if __name__ == "__main__":
    main(Path(sys.argv[1]), sys.argv[2:])
