"""Test-time adaptation's learning rate for the network that decides alone (issue 50 items 2-3).

``--adapt N`` takes N Adam steps at :class:`crossview.train.pair_adaptation.AdaptationSettings`'s
learning rate (2e-5), the budget chosen for the fused default, whose answer hardly moves with
the network. The network alone keeps gaining past ten steps at that rate (item 9: 40 steps,
about 3 minutes a pair). If the gain is a matter of how far the weights move, a larger rate
reaches it in fewer, affordable steps. This script follows one adaptation per scene and
learning rate (:func:`crossview.train.pair_adaptation.adaptation_steps`, the command line's
path) and scores, after each budget of :data:`BUDGETS` steps, the network alone
(``fuse=False``) and the network self-fused (``self_fuse=True``), as ``crossview eval`` scores
them (bad-2 and EPE of the left view over the known pixels).

Run (one process per learning rate, each on one core)::

    OMP_NUM_THREADS=1 python docs/results/network-alone/adapt_rate.py OUT_LR.json LR SCENE_DIR...

then ``python docs/results/network-alone/adapt_rate.py --table OUT.json...`` prints the means.
"""

from __future__ import annotations

import itertools
import json
import sys
from pathlib import Path

import numpy as np
import torch

import crossview
from crossview.data.io import read_image
from crossview.report import print_table, write_json
from crossview.train.pair_adaptation import AdaptationSettings, adaptation_steps

BUDGETS = (0, 5, 10, 20)  # steps after which the adapted network is scored
MODES = {"alone": {"fuse": False}, "self-fused": {"self_fuse": True}}


def scores(disparity: np.ndarray, truth: np.ndarray) -> tuple[float, float]:
    """``(bad-2, EPE)`` of a left disparity ``[H, W]`` over the known pixels of ``truth``
    (NaN or non-positive: unknown)."""
    known = np.isfinite(truth) & (truth > 0)
    errors = np.abs(disparity - truth)[known]
    return float(100 * (errors > 2.0).mean()), float(errors.mean())


def score_modes(model: torch.nn.Module, left: np.ndarray, right: np.ndarray,
                truth: np.ndarray) -> dict[str, tuple[float, float]]:
    """Each mode's ``(bad-2, EPE)`` for ``model`` on the pair."""
    with torch.no_grad():
        return {mode: scores(crossview.estimate_disparity(left, right, model=model, **kwargs)
                             .disparity[0].numpy(), truth)
                for mode, kwargs in MODES.items()}


def scene_records(model: torch.nn.Module, scene: Path, lr: float) -> list[dict]:
    """Adapt ``model`` to ``scene`` at ``lr`` for ``max(BUDGETS)`` steps, scoring every mode at
    every budget."""
    left, right = read_image(scene / "left.png"), read_image(scene / "right.png")
    truth = np.load(scene / "gt.npy").astype(np.float32)
    settings = AdaptationSettings(steps=max(BUDGETS), lr=lr)
    stages = itertools.chain([(0, model)], (
        (step, current.eval()) for step, _, current in
        adaptation_steps(model, left, right, "stereo", settings=settings) if step in BUDGETS))
    records = []
    for steps, current in stages:
        for mode, (bad, epe) in score_modes(current, left, right, truth).items():
            records.append({"scene": scene.name, "lr": lr, "steps": steps, "mode": mode,
                            "bad2": bad, "epe": epe})
            print(f"{scene.name} lr {lr:g} steps {steps} {mode}: bad-2 {bad:.2f} "
                  f"EPE {epe:.3f}", flush=True)
    return records


def run(out: Path, lr: float, scenes: list[Path]) -> None:
    """Every scene's records at ``lr``, written to ``out`` after each scene."""
    model = crossview.load_model("matchstereo-hybrid")
    records: list[dict] = []
    for scene in scenes:
        records += scene_records(model, scene, lr)
        write_json(out, {"budgets": BUDGETS, "records": records})


def table(paths: list[Path]) -> None:
    """Mean bad-2 (EPE) per learning rate, budget and mode over the scenes that every
    learning rate of the files ran on."""
    records = [r for p in paths for r in json.loads(p.read_text())["records"]]
    rates = {r["lr"] for r in records}
    common = set.intersection(*({r["scene"] for r in records if r["lr"] == lr} for lr in rates))
    records = [r for r in records if r["scene"] in common]
    rows = []
    for lr in sorted({r["lr"] for r in records}):
        for steps in BUDGETS:
            row: list[object] = [f"{lr:g}", steps]
            for mode in MODES:
                inside = [r for r in records
                          if r["lr"] == lr and r["steps"] == steps and r["mode"] == mode]
                row.append(f"{np.mean([r['bad2'] for r in inside]):.2f} "
                           f"({np.mean([r['epe'] for r in inside]):.3f})" if inside else "")
            rows.append(row)
    print_table(f"mean bad-2 % (EPE px) of the left view, {len(common)} scenes: "
                f"{', '.join(sorted(common))}", ["lr", "steps", *MODES], rows)


if __name__ == "__main__":
    if len(sys.argv) >= 3 and sys.argv[1] == "--table":
        table([Path(p) for p in sys.argv[2:]])
    elif len(sys.argv) >= 4:
        run(Path(sys.argv[1]), float(sys.argv[2]), [Path(p) for p in sys.argv[3:]])
    else:
        sys.exit(__doc__)
