"""The flow presets with the census choice against the forward-backward rule before it (issue 50,
item 5; ``flow_census_choice.py`` chose the rule for the default, ``best``).

The fusion's rule is swapped in one process: its choice among the candidates
(``dis_fusion._chosen``, the census choice with its tiers; shipped) or
``flow_dis_fusion.forward_backward_choice`` applied to DIS's runs one after the other (before),
monkeypatched into the fusion, so both run on the same build. (The committed JSONs of
2026-11-30 swapped ``census_choice``, which the fusion called then; from 2026-12-07 the fusion
computes each candidate's cost once and calls ``_chosen``, which this study swaps since.)

- ``epe``: every pair of ``flow_dis_fusion.pairs`` (real-train's and real-dev's stereo scenes as
  flow, real-dev's KITTI flow pair, Motorcycle) at its own size, ``crossview.estimate_flow`` of
  ``matchflow-hybrid`` with each of ``--preset`` under both rules; EPE of the forward flow on
  the known pixels. JSON ``{pair: {"root", "PRESET_census", "PRESET_fb": EPE}}``; means per root
  printed.
- ``time``: KITTI's flow pair resized to 375x1242 (area), every preset under both rules in turn,
  ``--rounds`` rounds, median seconds per call; JSON ``{"PRESET_RULE": seconds, "machine"}``.
  Ratios within the one run only: the machine is shared.

Run::

    OMP_NUM_THREADS=2 python docs/results/real-flow/flow_census_presets.py epe \\
        docs/results/real-flow/flow_census_presets.json ../shared/real-train ../shared/real-dev
    OMP_NUM_THREADS=2 python docs/results/real-flow/flow_census_presets.py time \\
        docs/results/real-flow/flow_census_presets_timing.json ../shared/real-dev
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Callable
from pathlib import Path

import cv2
import numpy as np
import torch

import crossview
from crossview.data.io import read_image
from crossview.models.dense import dis_fusion
from crossview.report import print_table, write_json

sys.path.insert(0, str(Path(__file__).parent))
sys.path.insert(1, str(Path(__file__).parents[1] / "real-stereo"))  # the stereo studies' helpers
from flow_dis_fusion import epe, forward_backward_choice, pairs

PRESETS = ("fast", "balanced", "best")
KITTI_SIZE = (1242, 375)  # (W, H)


def forward_backward_rule(candidates: list[np.ndarray], costs: list, tiers: tuple) -> np.ndarray:
    """The rule before the census choice: each DIS run takes the pixels where what the runs
    before it left fails the forward-backward check and it passes (the census ``costs`` and
    ``tiers`` the fusion hands its choice unused)."""
    fused = torch.from_numpy(candidates[0])
    for classical in candidates[1:]:
        fused = forward_backward_choice(fused, torch.from_numpy(classical))
    return fused.numpy()


# the fusion's choice among its candidates (the private ``dis_fusion._chosen``, which the fusion
# calls for its result and for the start of DIS's restart), as shipped or swapped
RULES: dict[str, Callable] = {"census": dis_fusion._chosen, "fb": forward_backward_rule}


def flow(model: torch.nn.Module, frame0: np.ndarray, frame1: np.ndarray, preset: str,
         rule: str) -> np.ndarray:
    """The forward flow ``[H, W, 2]`` of ``preset`` with the fusion's rule set to ``rule``."""
    dis_fusion._chosen = RULES[rule]
    try:
        result = crossview.estimate_flow(frame0, frame1, model=model, preset=preset)
    finally:
        dis_fusion._chosen = RULES["census"]
    return result.flow[0].permute(1, 2, 0).numpy()


def epe_step(out: Path, roots: list[str], presets: list[str]) -> None:
    model = crossview.load_model("matchflow-hybrid")
    table: dict[str, dict] = {}
    for root, name, frame0, frame1, truth, known in pairs(roots):
        table[name] = {"root": root, **{f"{p}_{r}": epe(flow(model, frame0, frame1, p, r),
                                                        truth, known)
                                        for p in presets for r in RULES}}
        print(name, {k: round(v, 3) for k, v in table[name].items() if k != "root"}, flush=True)
        write_json(out, table)
    settings = [f"{p}_{r}" for p in presets for r in RULES]
    rows = []
    for label in ("real-train", "real-dev", "scikit-image"):
        names = [n for n, row in table.items() if label in row["root"]]
        rows.append((f"{label} ({len(names)})",
                     *(float(np.mean([table[n][s] for n in names])) for s in settings)))
    print_table("mean EPE px", ("pairs", *settings), rows)


def time_step(out: Path, dev_root: Path, presets: list[str], rounds: int) -> None:
    frame0, frame1 = (cv2.resize(read_image(dev_root / "kitti2012_flow_000045" / name), KITTI_SIZE,
                                 interpolation=cv2.INTER_AREA)
                      for name in ("frame0.png", "frame1.png"))
    model = crossview.load_model("matchflow-hybrid")
    seconds: dict[str, list[float]] = {}
    for preset in presets:
        flow(model, frame0, frame1, preset, "census")  # warm-up
        for _ in range(rounds):
            for rule in RULES:
                start = time.perf_counter()
                flow(model, frame0, frame1, preset, rule)
                seconds.setdefault(f"{preset}_{rule}", []).append(time.perf_counter() - start)
    medians = {k: float(np.median(v)) for k, v in seconds.items()}
    write_json(out, medians)
    print_table("median s per pair at 375x1242", ("preset", "census", "forward-backward", "ratio"),
                [(p, medians[f"{p}_census"], medians[f"{p}_fb"],
                  medians[f"{p}_census"] / medians[f"{p}_fb"]) for p in presets])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("step", choices=("epe", "time"))
    parser.add_argument("out", type=Path)
    parser.add_argument("roots", nargs="+", help="epe: the roots; time: real-dev")
    parser.add_argument("--preset", action="append", choices=PRESETS,
                        help="presets to measure (default: epe fast and balanced, time all)")
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    if args.step == "epe":
        epe_step(args.out, args.roots, args.preset or ["fast", "balanced"])
    else:
        time_step(args.out, Path(args.roots[0]), args.preset or list(PRESETS), args.rounds)


if __name__ == "__main__":
    main()
