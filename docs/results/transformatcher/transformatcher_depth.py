"""Is the refinement short of capacity? The bundled 6-layer refiner grown to DEPTH match-to-match
layers, trained with the control recipe of the border and backbone experiments, scored on the 96
held-out pairs of ``semantic evaluate``.

The extra layers are appended as the identity (their attention output map and their MLP's last
linear map are zero, so the grown model computes the bundled one's coordinates exactly; the
script checks it on a random pair). Training: seed 7, batch 2, 128 keypoints, dense loss 1, 450
steps at 1e-3 then 150 at 1e-4, frozen backbone, checkpoints and resume in RUN_DIR. The recorded
results were trained with the former ``crossview.train.semantic`` app, which kept Adam's state
across the rate change; this script now runs the semantic recipe of ``crossview train`` as two
runs (RUN_DIR/lr1e-3, then RUN_DIR/lr1e-4 started from its weights), whose warps and Adam
state differ from that app's: expect close, not equal, numbers.

Run: ``OMP_NUM_THREADS=1 python docs/results/transformatcher/transformatcher_depth.py DEPTH RUN_DIR
OUT.json``
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import torch

from crossview.experiments.semantic_warps import evaluate_warps
from crossview.models.transformatcher.bundle import export_transformatcher
from crossview.models.transformatcher.inference import WEIGHTS, load_transformatcher
from crossview.models.transformatcher.model import TASK, TransforMatcher
from crossview.models.weights import read_state_dict
from crossview.train.config import config_from_dict
from crossview.train.trainer import Trainer


def grown(depth: int) -> TransforMatcher:
    """The bundled weights in a refiner of ``depth`` layers, the extra ones the identity."""
    torch.manual_seed(0)
    model = TransforMatcher(depth=depth)
    for layer in model.refiner.layers[6:]:
        for linear in (layer.attn.out, layer.mlp[2]):
            torch.nn.init.zeros_(linear.weight)
            torch.nn.init.zeros_(linear.bias)
    state = {**model.head_state_dict(), **read_state_dict(WEIGHTS, task=TASK)}
    model.load_trained_state_dict(state)
    return model


def main(depth: int, run_dir: Path, out: Path) -> None:
    model, bundled = grown(depth).eval(), load_transformatcher(WEIGHTS).eval()
    src, tgt = torch.rand(2, 1, 3, 240, 240) * 255
    with torch.no_grad():
        gap = (model(src, tgt)["coords"] - bundled(src, tgt)["coords"]).abs().max().item()
    print(f"grown vs bundled: max |coords difference| {gap}")
    init = run_dir.with_suffix(".init.safetensors")
    if not init.exists():
        export_transformatcher(model, init, {"grown_to_depth": str(depth)})
    trained = None
    for lr, steps in ((1e-3, 450), (1e-4, 150)):
        cfg = config_from_dict({
            "task": "semantic",
            "model": {"name": "transformatcher", "overrides": {"grid": 15, "depth": depth}},
            "data": {"train": "synthetic-warps", "val": "synthetic-warps", "train_size": 10**6,
                     "val_size": 0, "seed": 7},
            "recipe": {"keypoints": 128, "dense_weight": 1.0},
            "optim": {"lr": lr, "weight_decay": 0.0, "schedule": "constant", "grad_clip": 0.0},
            "train": {"steps": steps, "batch_size": 2, "seed": 7, "ckpt_every": 25,
                      "out_dir": str(run_dir / f"lr{lr:g}")}})
        resume = any(Path(cfg.train.out_dir).glob("step-*.pt"))
        trainer = Trainer(cfg, resume=resume, init_weights=None if resume else init)
        trainer.run()
        trained = trainer.model
        init = run_dir / f"lr{lr:g}.safetensors"
        export_transformatcher(trained, init, {"grown_to_depth": str(depth)})
    result = {"depth": depth, "pairs": 96, "coords_gap_at_start": gap,
              **evaluate_warps(trained, pairs=96)}
    out.write_text(json.dumps(result, indent=1) + "\n")
    print(json.dumps(result, indent=1))


if __name__ == "__main__":
    main(int(sys.argv[1]), Path(sys.argv[2]), Path(sys.argv[3]))
