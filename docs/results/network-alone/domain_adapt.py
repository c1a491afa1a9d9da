"""Adaptation to real photographs once, not to each pair (issue 50 item 2, item 14).

Test-time adaptation (``--adapt N``, item 11) takes the network alone from 22.50 to 16.97 %
bad-2 on the five real-train scenes held out of the bundled weights' training, but costs N
forward and backward passes on every pair. If part of that gain is not about the pair but
about real photographs (their noise, exposure, textures, disparity range), the same
self-supervised loss (:func:`crossview.train.photometric.photometric_loss`, no ground truth)
taken over many real pairs would move the shipped weights, and the network alone would gain
with no cost at run time.

This script takes ``steps`` Adam steps at ``lr`` (one optimiser throughout), each on one real
pair at full resolution through the command line's padded pass
(:func:`crossview.models.dense.inference.run_padded`, with the half-resolution start), cycling
through the pairs in a seeded random order; the pairs are every ``left.png``/``right.png``
folder under the given roots except the held-out scenes (their ground truth, where there is
one, is never read). Every ``every`` steps it scores the network alone and self-fused on the
held-out scenes (``crossview eval``'s scores, :func:`adapt_rate.score_modes`) and writes the
records and the weights (safetensors) so far.

Run::

    OMP_NUM_THREADS=2 python docs/results/network-alone/domain_adapt.py OUT_DIR \\
        --holdout HOLDOUT_DIR --pairs ../shared/real-unlabelled ../shared/real-train \\
        --steps 200 --every 25 --lr 1e-4
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np
import torch
from safetensors.torch import save_file

import crossview
from crossview.data.io import read_image
from crossview.models.dense.inference import initialises_low, run_padded
from crossview.report import write_json
from crossview.train.photometric import photometric_loss

sys.path.insert(0, str(Path(__file__).parent))
from adapt_rate import score_modes


def pair_folders(roots: list[Path], excluded: set[str]) -> list[Path]:
    """Every folder under ``roots`` holding ``left.png`` and ``right.png``, by name, less
    ``excluded``."""
    return sorted((p.parent for root in roots for p in root.glob("*/left.png")
                   if (p.parent / "right.png").is_file() and p.parent.name not in excluded),
                  key=lambda p: p.name)


def as_batch(path: Path) -> torch.Tensor:
    """The image at ``path`` as ``[1, 3, H, W]`` float 0..255."""
    return torch.from_numpy(read_image(path)).permute(2, 0, 1)[None].float()


def holdout_scores(model: torch.nn.Module, scenes: list[Path], step: int) -> list[dict]:
    """Each held-out scene's bad-2 and EPE in every mode of :data:`adapt_rate.MODES`."""
    model.eval()
    records = []
    for scene in scenes:
        truth = np.load(scene / "gt.npy").astype(np.float32)
        left, right = read_image(scene / "left.png"), read_image(scene / "right.png")
        for mode, (bad, epe) in score_modes(model, left, right, truth).items():
            records.append({"scene": scene.name, "steps": step, "mode": mode, "bad2": bad,
                            "epe": epe})
    for mode in ("alone", "self-fused"):
        inside = [r for r in records if r["mode"] == mode]
        print(f"step {step} {mode}: mean bad-2 {np.mean([r['bad2'] for r in inside]):.2f} "
              f"EPE {np.mean([r['epe'] for r in inside]):.3f}", flush=True)
    return records


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("out", type=Path)
    parser.add_argument("--holdout", type=Path, required=True,
                        help="folder of the held-out scenes (left.png, right.png, gt.npy)")
    parser.add_argument("--pairs", type=Path, nargs="+", required=True)
    parser.add_argument("--steps", type=int, default=200)
    parser.add_argument("--every", type=int, default=25)
    parser.add_argument("--lr", type=float, default=1e-4)
    parser.add_argument("--smooth-weight", type=float, default=0.5)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()

    held_out = sorted(p.parent for p in args.holdout.glob("*/gt.npy"))
    pairs = pair_folders(args.pairs, {p.name for p in held_out})
    print(f"{len(pairs)} training pairs, {len(held_out)} held-out scenes", flush=True)
    model = crossview.load_model("matchstereo-hybrid")
    lri = initialises_low(model, None)
    optimizer = torch.optim.Adam(model.parameters(), lr=args.lr)
    order = np.random.default_rng(args.seed)
    queue: list[Path] = []
    args.out.mkdir(parents=True, exist_ok=True)
    records = holdout_scores(model, held_out, 0)
    history = []
    start = time.time()
    for step in range(1, args.steps + 1):
        if not queue:
            queue = [pairs[i] for i in order.permutation(len(pairs))]
        pair = queue.pop()
        model.train(False)  # as test-time adaptation: norm layers in eval mode
        x0, x1 = as_batch(pair / "left.png"), as_batch(pair / "right.png")
        with torch.enable_grad():
            field = run_padded(model, x0, x1, "stereo", lri)[0]
            loss, parts = photometric_loss(x0, x1, field, smooth_weight=args.smooth_weight)
            optimizer.zero_grad(set_to_none=True)
            loss.backward()
            optimizer.step()
        history.append({"step": step, "pair": pair.name, "loss": float(loss.detach()),
                        **parts})
        print(f"step {step} {pair.name} loss {float(loss):.4f} "
              f"({time.time() - start:.0f} s)", flush=True)
        if step % args.every == 0 or step == args.steps:
            with torch.no_grad():
                records += holdout_scores(model, held_out, step)
            save_file({k: v.detach().contiguous() for k, v in model.state_dict().items()},
                      str(args.out / "weights.safetensors"))
            write_json(args.out / "records.json",
                       {"settings": {"lr": args.lr, "smooth_weight": args.smooth_weight,
                                     "seed": args.seed, "steps": args.steps,
                                     "pairs": [p.name for p in pairs]},
                        "records": records, "history": history})


if __name__ == "__main__":
    main()
