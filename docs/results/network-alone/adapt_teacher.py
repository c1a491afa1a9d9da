"""Test-time adaptation taught by the fused default (issue 50 items 2-3): does the network,
adapted to a pair with the fused default's left-right consistent answer as a target beside the
self-supervised loss, answer better on its own than with the self-supervised loss alone?

The fused default (SGBM, row fill, medians; :func:`crossview.models.dense.inference.predict_fields`
with the bundled model's settings) answers the pair first; its two views' fields where they agree
within :data:`CHECK_PX` are the teacher (as ``pseudo_labels.py`` makes them for distillation).
A copy of the network then takes Adam steps at ``LR`` on ``photometric + WEIGHT * L1`` (the L1
between the network's x field and the teacher's, px, over the teacher's pixels; both views),
through the network alone's pass (low-resolution initialisation, full size). After each budget
of ``BUDGETS`` steps the network alone (``fuse=False``) and self-fused (``self_fuse=True``) are
scored as ``crossview eval`` scores them (bad-2 and EPE of the left view over the known
pixels). ``WEIGHT = 0`` is the shipped ``--adapt`` (``adapt_rate.py``).

Run (one process per weight, each on one core)::

    OMP_NUM_THREADS=1 python docs/results/network-alone/adapt_teacher.py \
        OUT.json WEIGHT LR SCENE_DIR...

then ``python docs/results/network-alone/adapt_teacher.py --table OUT.json...`` prints the
means.
"""

from __future__ import annotations

import copy
import itertools
import json
import sys
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import torch

import crossview
from crossview.data.image_batch import as_image_batch
from crossview.data.io import read_image
from crossview.geometry.consistency import noc_mask
from crossview.models.dense.inference import predict_fields, run_padded
from crossview.report import print_table, write_json
from crossview.train.photometric import photometric_loss

sys.path.insert(0, str(Path(__file__).parent))
from adapt_rate import BUDGETS, MODES, score_modes

CHECK_PX = 1.0  # the teacher's left-right check, px (pseudo_labels.py's)
SMOOTH_WEIGHT = 0.5  # AdaptationSettings' default


def teacher(model: torch.nn.Module, left: np.ndarray, right: np.ndarray
            ) -> tuple[torch.Tensor, torch.Tensor]:
    """The fused default's fields ``[2, H, W, 2]`` of the pair and where its views agree
    ``[2, H, W]`` bool."""
    with torch.no_grad():
        fields = predict_fields(model, left, right, "stereo")
    return fields.field, noc_mask(fields.field, CHECK_PX)


def taught_steps(model: torch.nn.Module, left: np.ndarray, right: np.ndarray, weight: float,
                 lr: float, steps: int) -> Iterator[tuple[int, torch.nn.Module]]:
    """Adapt a copy of ``model`` to the pair for ``steps`` steps on ``photometric + weight *
    L1`` to the fused default's consistent fields: yields ``(step, the copy)`` for steps
    ``1 .. steps`` (one object, updated in place)."""
    target, known = teacher(model, left, right)
    print(f"  teacher on {100 * float(known.float().mean()):.1f} % of pixels", flush=True)
    x0, x1 = as_image_batch(left, "left").float(), as_image_batch(right, "right").float()
    adapted = copy.deepcopy(model).eval()
    optimizer = torch.optim.Adam(adapted.parameters(), lr=lr)
    for step in range(1, steps + 1):
        with torch.enable_grad():
            field = run_padded(adapted, x0, x1, "stereo", True)[0]
            loss, _ = photometric_loss(x0, x1, field, smooth_weight=SMOOTH_WEIGHT)
            taught = (field[..., 0] - target[..., 0]).abs()[known].mean()
            optimizer.zero_grad(set_to_none=True)
            (loss + weight * taught).backward()
            optimizer.step()
        print(f"  step {step}: photometric {float(loss.detach()):.4f} teacher L1 "
              f"{float(taught.detach()):.3f} px", flush=True)
        yield step, adapted


def scene_records(model: torch.nn.Module, scene: Path, weight: float, lr: float) -> list[dict]:
    """Adapt a copy of ``model`` to ``scene`` for ``max(BUDGETS)`` steps, scoring every mode
    at every budget."""
    left, right = read_image(scene / "left.png"), read_image(scene / "right.png")
    truth = np.load(scene / "gt.npy").astype(np.float32)
    stages = itertools.chain([(0, model)], (
        (step, adapted) for step, adapted in
        taught_steps(model, left, right, weight, lr, max(BUDGETS)) if step in BUDGETS))
    records = []
    for steps, current in stages:
        for mode, (bad, epe) in score_modes(current, left, right, truth).items():
            records.append({"scene": scene.name, "weight": weight, "lr": lr,
                            "steps": steps, "mode": mode, "bad2": bad, "epe": epe})
            print(f"{scene.name} weight {weight:g} steps {steps} {mode}: bad-2 {bad:.2f} "
                  f"EPE {epe:.3f}", flush=True)
    return records


def run(out: Path, weight: float, lr: float, scenes: list[Path]) -> None:
    """Every scene's records, written to ``out`` after each scene."""
    model = crossview.load_model("matchstereo-hybrid")
    records: list[dict] = []
    for scene in scenes:
        records += scene_records(model, scene, weight, lr)
        write_json(out, {"budgets": BUDGETS, "records": records})


def table(paths: list[Path]) -> None:
    """Mean bad-2 (EPE) per weight, learning rate, budget and mode."""
    records = [r for p in paths for r in json.loads(p.read_text())["records"]]
    rows = []
    for weight, lr in sorted({(r["weight"], r["lr"]) for r in records}):
        for steps in BUDGETS:
            row: list[object] = [f"{weight:g}", f"{lr:g}", steps]
            for mode in MODES:
                inside = [r for r in records if (r["weight"], r["lr"], r["steps"], r["mode"])
                          == (weight, lr, steps, mode)]
                row.append(f"{np.mean([r['bad2'] for r in inside]):.2f} "
                           f"({np.mean([r['epe'] for r in inside]):.3f}) n={len(inside)}")
            rows.append(row)
    print_table("mean bad-2 % (EPE px) of the left view", ["weight", "lr", "steps", *MODES],
                rows)


if __name__ == "__main__":
    if len(sys.argv) >= 3 and sys.argv[1] == "--table":
        table([Path(p) for p in sys.argv[2:]])
    elif len(sys.argv) >= 5:
        run(Path(sys.argv[1]), float(sys.argv[2]), float(sys.argv[3]),
            [Path(p) for p in sys.argv[4:]])
    else:
        sys.exit(__doc__)
