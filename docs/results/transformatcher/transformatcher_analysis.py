"""Where the raw correlation and the refinement fail on held-out warps at 240 x 240.

Writes ``docs/results/transformatcher/transformatcher_analysis.json``: PCK@0.05 / @0.1 (``img``
threshold, pooled) and the median error in pixels of

- the hard arg-max of single correlation layers and of layer subsets (which layers localise),
- the kernel soft-argmax of the refined map and of the raw mean correlation for several
  ``sigma`` (cells) and ``beta`` (inverse temperature), and the soft sampler's ``tau``.

Run: ``OMP_NUM_THREADS=1 python docs/results/transformatcher/transformatcher_analysis.py
[WEIGHTS]``. Scores in the grid frame, as the model does (see ``transformatcher_diagnosis.py``).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import torch
from safetensors.torch import load_file

from crossview.data.synthetic.warp_batches import warp_batch, warp_dataset
from crossview.models.keypoints.coordinates import normalised_to_pixels, pixels_to_normalised
from crossview.models.transformatcher.correlation import upsample_correlation
from crossview.models.transformatcher.inference import WEIGHTS
from crossview.models.transformatcher.model import EVAL_TAU, TransforMatcher
from crossview.models.transformatcher.softargmax import hard_argmax, kernel_soft_argmax, soft_sample

SIZE, PAIRS = 240, 32
LAYER_SETS = {**{f"layer {i}": [i] for i in range(11)},
              "stride 16 (layers 0-5)": list(range(6)),
              "stride 32 (layers 6-10)": list(range(6, 11)),
              "all 11 (the raw baseline)": list(range(11))}


def _score(coords: torch.Tensor, kp: torch.Tensor, gt: torch.Tensor,
           tau: float = EVAL_TAU) -> dict[str, float]:
    # keypoints in the grid frame (TransforMatcher.frame_shift, 1 / 15 - 1 / 240 at 240 px)
    shift = 1 / (SIZE // 16) - 1 / SIZE
    pred = (soft_sample(coords, kp + shift, tau) - shift).clamp(-1, 1)
    err = (normalised_to_pixels(pred, SIZE, SIZE) - gt).norm(dim=-1)
    return {"pck@0.05": 100 * (err <= 0.05 * SIZE).float().mean().item(),
            "pck@0.1": 100 * (err <= 0.1 * SIZE).float().mean().item(),
            "median_px": err.median().item()}


@torch.no_grad()
def main(weights: Path) -> dict:
    torch.set_num_threads(1)
    model = TransforMatcher(grid=SIZE // 16)
    model.load_trained_state_dict(load_file(str(weights)))
    model.eval()
    data = warp_dataset("heldout", SIZE, PAIRS, 0, 32)
    corr, refined, kp, gt = [], [], [], []
    for start in range(0, PAIRS, 4):
        b = warp_batch(data, list(range(start, start + 4)))
        out = model(b["src"], b["tgt"])
        corr.append(out["corr"])
        refined.append(out["refined"])
        kp.append(pixels_to_normalised(b["kp_src"], SIZE, SIZE))
        gt.append(b["kp_tgt"])
    corr, refined, kp, gt = (torch.cat(t) for t in (corr, refined, kp, gt))
    raw = upsample_correlation(corr.mean(1))
    beta = model.log_beta.exp().item()
    result: dict = {"weights": str(weights), "pairs": PAIRS, "learned_beta": beta,
                    "layers_hard_argmax": {
                        name: _score(hard_argmax(upsample_correlation(corr[:, idx].mean(1))),
                                     kp, gt) for name, idx in LAYER_SETS.items()}}
    for name, scores in (("refined", refined), ("raw", raw)):
        result[f"{name}_hard_argmax"] = _score(hard_argmax(scores), kp, gt)
        result[f"{name}_kernel_soft_argmax"] = {
            f"sigma {sigma} beta {b:.4g}": _score(kernel_soft_argmax(scores, sigma, b), kp, gt)
            for sigma in (1, 2, 3, 5, 10) for b in (beta, 50.0, 100.0, 200.0)}
    result["refined_tau"] = {f"tau {tau}": _score(kernel_soft_argmax(refined, model.sigma, beta),
                                                  kp, gt, tau) for tau in (0.02, 0.05, 0.1)}
    return result


if __name__ == "__main__":
    out = main(Path(sys.argv[1]) if len(sys.argv) > 1 else WEIGHTS)
    path = Path(__file__).with_name("transformatcher_analysis.json")
    path.write_text(json.dumps(out, indent=2))
    print(f"wrote {path}")
