"""Is the refinement short of capacity? The bundled 6-layer refiner grown to DEPTH match-to-match
layers, trained with the control recipe of the border and backbone experiments, scored on the 96
held-out pairs of ``semantic evaluate``.

The extra layers are appended as the identity (their attention output map and their MLP's last
linear map are zero, so the grown model computes the bundled one's coordinates exactly; the
script checks it on a random pair). Training: seed 7, batch 2, 128 keypoints, dense loss 1, 450
steps at 1e-3 then 150 at 1e-4, frozen backbone, checkpoints and resume in RUN_DIR (the
``crossview.train.semantic`` trainer, whose model is built at DEPTH layers here).

Run: ``OMP_NUM_THREADS=1 python docs/results/transformatcher_depth.py DEPTH RUN_DIR OUT.json``
"""

from __future__ import annotations

import functools
import json
import sys
from pathlib import Path

import torch

import crossview.train.semantic as semantic
from crossview.models.transformatcher.inference import WEIGHTS, load_transformatcher
from crossview.models.transformatcher.model import TransforMatcher
from crossview.models.weights import read_state_dict


def grown(depth: int) -> TransforMatcher:
    """The bundled weights in a refiner of ``depth`` layers, the extra ones the identity."""
    torch.manual_seed(0)
    model = TransforMatcher(depth=depth)
    for layer in model.refiner.layers[6:]:
        for linear in (layer.attn.out, layer.mlp[2]):
            torch.nn.init.zeros_(linear.weight)
            torch.nn.init.zeros_(linear.bias)
    state = {**model.head_state_dict(), **read_state_dict(WEIGHTS, task=semantic.TASK)}
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
        semantic.export_weights(model, init, {"grown_to_depth": str(depth)})
    semantic.TransforMatcher = functools.partial(TransforMatcher, depth=depth)
    common = {"grid": 15, "batch": 2, "keypoints": 128, "dense_weight": 1.0, "seed": 7,
              "minutes": 600}
    semantic.train(run_dir, lr=1e-3, max_steps=450, init=init, **common)
    trained = semantic.train(run_dir, lr=1e-4, max_steps=600, **common)
    result = {"depth": depth, "pairs": 96, "coords_gap_at_start": gap,
              **semantic.evaluate_warps(trained, pairs=96)}
    out.write_text(json.dumps(result, indent=1) + "\n")
    print(json.dumps(result, indent=1))


if __name__ == "__main__":
    main(int(sys.argv[1]), Path(sys.argv[2]), Path(sys.argv[3]))
