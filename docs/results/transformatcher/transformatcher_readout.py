"""Does the read-out of the refined correlation limit keypoint transfer? Held-out warps.

The model reads target positions off the refined, upsampled correlation ``[B, 30, 30, 30, 30]``
with the kernel soft-argmax (Eq. 10: a Gaussian of ``sigma`` cells around the arg-max, learned
inverse temperature ``beta``). Near an image side that window is cut by the image edge, which
could pull positions inwards. This script scores PCK@0.05 (``img`` threshold, 240 px) for
other read-outs of the *same* refined map: the hard arg-max, the kernel with a sharper
``beta`` or a narrower ``sigma``, and a soft-argmax restricted to the ``(2 r + 1)^2`` cells
around the arg-max. Keypoints are then transferred by the model's soft sampler (Eq. 11).

Run: ``OMP_NUM_THREADS=1 python docs/results/transformatcher/transformatcher_readout.py [PAIRS]
[WEIGHTS]`` (default 96 pairs, the bundled weights; writes
``docs/results/transformatcher/transformatcher_readout.json``).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import torch
from torch import Tensor

from crossview.data.synthetic.warp_batches import warp_batch, warp_dataset
from crossview.models.keypoints.coordinates import (
    grid_centres,
    normalised_to_pixels,
    pixels_to_normalised,
)
from crossview.models.transformatcher.inference import load_transformatcher
from crossview.models.transformatcher.model import EVAL_TAU
from crossview.models.transformatcher.softargmax import hard_argmax, kernel_soft_argmax

OUT = Path(__file__).with_name("transformatcher_readout.json")


def local_soft_argmax(corr: Tensor, beta: float, radius: int) -> Tensor:
    """Soft-argmax of ``corr [B, hs, ws, ht, wt]`` over the target cells within ``radius`` cells
    (per axis) of each source cell's arg-max -> normalised ``(x, y)`` ``[B, hs, ws, 2]``."""
    b, hs, ws, ht, wt = corr.shape
    best = corr.reshape(b, hs, ws, ht * wt).argmax(-1)
    ys = torch.arange(ht).view(1, 1, 1, ht, 1)
    xs = torch.arange(wt).view(1, 1, 1, 1, wt)
    near = (((ys - (best // wt)[..., None, None]).abs() <= radius)
            & ((xs - (best % wt)[..., None, None]).abs() <= radius))
    weights = (beta * corr).masked_fill(~near, float("-inf")).reshape(b, hs, ws, -1).softmax(-1)
    return weights @ grid_centres(ht, wt, corr.device, corr.dtype).reshape(-1, 2)


def main(pairs: int, weights: str | None = None) -> dict[str, float]:
    torch.set_num_threads(1)
    model = load_transformatcher(weights)
    size, beta, sigma = model.image_size, model.log_beta.exp().item(), model.sigma
    readouts = {
        f"kernel, sigma {sigma:g}, beta {beta:.1f} (the model)": lambda r: kernel_soft_argmax(
            r, sigma, beta),
        "hard arg-max": hard_argmax,
        "kernel, beta x 2": lambda r: kernel_soft_argmax(r, sigma, 2 * beta),
        "kernel, beta x 4": lambda r: kernel_soft_argmax(r, sigma, 4 * beta),
        "kernel, sigma 5": lambda r: kernel_soft_argmax(r, 5.0, beta),
        "kernel, sigma 3": lambda r: kernel_soft_argmax(r, 3.0, beta),
        "local soft-argmax, r 1": lambda r: local_soft_argmax(r, beta, 1),
        "local soft-argmax, r 2": lambda r: local_soft_argmax(r, beta, 2),
    }
    data = warp_dataset("heldout", size, pairs, 0, 32)
    hits, total = dict.fromkeys(readouts, 0), 0
    with torch.no_grad():
        for start in range(0, pairs, 4):
            batch = warp_batch(data, list(range(start, min(pairs, start + 4))))
            refined = model(batch["src"], batch["tgt"])["refined"]
            kp = pixels_to_normalised(batch["kp_src"], size, size)
            for name, readout in readouts.items():
                pred = normalised_to_pixels(model.transfer(readout(refined), kp, EVAL_TAU),
                                            size, size)
                hits[name] += ((pred - batch["kp_tgt"]).norm(dim=-1) <= 0.05 * size).sum().item()
            total += batch["kp_tgt"].shape[:2].numel()
    return {name: round(100 * count / total, 2) for name, count in hits.items()}


if __name__ == "__main__":
    n = int(sys.argv[1]) if len(sys.argv) > 1 else 96
    result = {"pairs": n, "keypoints_per_pair": 32, "pck@0.05": main(n, *sys.argv[2:3])}
    OUT.write_text(json.dumps(result, indent=2) + "\n")
    print(json.dumps(result, indent=2))
