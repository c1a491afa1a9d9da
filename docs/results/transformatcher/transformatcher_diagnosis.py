"""Where the raw arg-max and the refined TransforMatcher miss PCK@0.05 on held-out warps, and
what the grid-frame fix changes.

For the raw correlation's hard arg-max and the refined model, before the fix (keypoints in the
image frame, stride-32 layers stretched onto the grid with ``align_corners=False``) and after
it (``TransforMatcher.frame_shift`` + position-true resampling, the code as it is now): PCK@0.05
/ @0.1 (``img`` threshold, 240 px: 12 / 24 px), the median error, a histogram of the errors in
pixels, the mean error vector, and the least-squares fit of the error vector on the true
displacement, the source position and 1 (all keypoints, and those within 12 / 24 px), plus
PCK@0.05 when the keypoints are shifted by ``s`` pixels before the transfer and back after it
(a sweep that finds the frame offset from data; 0 = the old frame).

Run: ``OMP_NUM_THREADS=1 python docs/results/transformatcher/transformatcher_diagnosis.py [WEIGHTS]
[PAIRS]`` (writes ``docs/results/transformatcher/transformatcher_diagnosis[_PAIRS].json``).
"""

from __future__ import annotations

import itertools
import json
import sys
from pathlib import Path

import torch
import torch.nn.functional as F
from safetensors.torch import load_file

from crossview.data.synthetic.warp_batches import warp_batch, warp_dataset
from crossview.models.keypoints.coordinates import normalised_to_pixels, pixels_to_normalised
from crossview.models.transformatcher.correlation import (
    multilayer_correlation,
    upsample_correlation,
)
from crossview.models.transformatcher.inference import WEIGHTS
from crossview.models.transformatcher.model import EVAL_TAU, TransforMatcher
from crossview.models.transformatcher.softargmax import hard_argmax, soft_sample

SIZE = 240
BINS = (0, 4, 8, 12, 16, 24, 32, 48, float("inf"))
SHIFTS = (0.0, 4.0, 6.0, 7.5, 9.0, 12.0)


def _old_correlation(fs: list[torch.Tensor], ft: list[torch.Tensor]) -> torch.Tensor:
    """The correlation as computed before the fix (stride-32 maps stretched onto the grid)."""
    def resize(x: torch.Tensor) -> torch.Tensor:
        if x.shape[-1] == SIZE // 16:
            return x
        return F.interpolate(x, size=(SIZE // 16,) * 2, mode="bilinear", align_corners=False)
    return multilayer_correlation([resize(f) for f in fs], [resize(f) for f in ft],
                                  (SIZE // 16, SIZE // 16))


def _stats(err: torch.Tensor, kps: torch.Tensor, kpt: torch.Tensor) -> dict:
    """``err [N, 2]`` pixel error vectors of keypoints ``kps`` -> ``kpt`` ``[N, 2]``."""
    dist = err.norm(dim=-1)
    design = torch.cat([kpt - kps, kps - (SIZE - 1) / 2, torch.ones(len(err), 1)], dim=1)
    fits = {}
    for name, keep in (("all", dist >= 0), ("within 24 px", dist <= 24),
                       ("within 12 px", dist <= 12)):
        sol = torch.linalg.lstsq(design[keep], err[keep]).solution  # [5, 2]
        fits[name] = {axis: dict(zip(("dx", "dy", "x", "y", "1"),
                                     [round(v, 4) for v in sol[:, i].tolist()], strict=True))
                      for i, axis in enumerate(("err_x", "err_y"))}
    return {"pck@0.05": 100 * (dist <= 0.05 * SIZE).float().mean().item(),
            "pck@0.1": 100 * (dist <= 0.1 * SIZE).float().mean().item(),
            "median_px": dist.median().item(),
            "mean_error_xy_px": err.mean(0).tolist(),
            "histogram_px_percent": {
                f"{lo:g}-{hi:g}": 100 * ((dist > lo) & (dist <= hi)).float().mean().item()
                for lo, hi in itertools.pairwise(BINS)},
            "error_fit_on_displacement_position": fits}


@torch.no_grad()
def main(weights: Path, pairs: int) -> dict:
    torch.set_num_threads(1)
    model = TransforMatcher(grid=SIZE // 16)
    model.load_trained_state_dict(load_file(str(weights)))
    model.eval()
    data = warp_dataset("heldout", SIZE, pairs, 0, 32)
    coords: dict[str, list[torch.Tensor]] = {}
    kps, kpt = [], []
    for start in range(0, pairs, 4):
        b = warp_batch(data, list(range(start, min(pairs, start + 4))))
        n = len(b["src"])
        feats = model.backbone.features(torch.cat((b["src"], b["tgt"])))
        fs, ft = [f[:n] for f in feats], [f[n:] for f in feats]
        for frame, corr in (("before", _old_correlation(fs, ft)),
                            ("after", multilayer_correlation(fs, ft, (model.grid,) * 2))):
            coords.setdefault(f"{frame}/raw", []).append(
                hard_argmax(upsample_correlation(corr.mean(1), model.upsample)))
            coords.setdefault(f"{frame}/refined", []).append(model.refine(corr)["coords"])
        kps.append(b["kp_src"])
        kpt.append(b["kp_tgt"])
    kps, kpt = torch.cat(kps), torch.cat(kpt)
    shift_px = model.frame_shift * SIZE / 2
    result: dict = {"weights": str(weights), "pairs": pairs, "keypoints": kps.numel() // 2,
                    "frame_shift_px": shift_px,
                    "mean_displacement_px": (kpt - kps).norm(dim=-1).mean().item()}

    def transfer(c: torch.Tensor, shift: float) -> torch.Tensor:
        kp = pixels_to_normalised(kps + shift, SIZE, SIZE)
        return normalised_to_pixels(soft_sample(c, kp, EVAL_TAU), SIZE, SIZE) - shift

    for name, parts in coords.items():
        c = torch.cat(parts)
        frame = name.split("/")[0]
        if frame == "after":  # exactly what the code does now
            pred = normalised_to_pixels(
                model.transfer(c, pixels_to_normalised(kps, SIZE, SIZE), EVAL_TAU), SIZE, SIZE)
        else:
            pred = transfer(c, 0.0)
        result[name] = _stats((pred - kpt).reshape(-1, 2), kps.reshape(-1, 2),
                              kpt.reshape(-1, 2))
        if frame == "before":
            result[f"{name} shift sweep pck@0.05"] = {
                f"{s:g} px": 100 * ((transfer(c, s) - kpt).norm(dim=-1) <= 0.05 * SIZE)
                .float().mean().item() for s in SHIFTS}
    return result


if __name__ == "__main__":
    weights = Path(sys.argv[1]) if len(sys.argv) > 1 else WEIGHTS
    pairs = int(sys.argv[2]) if len(sys.argv) > 2 else 32
    out = main(weights, pairs)
    suffix = "" if pairs == 32 else f"_{pairs}"
    path = Path(__file__).with_name(f"transformatcher_diagnosis{suffix}.json")
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(json.dumps(out, indent=2))
    tmp.replace(path)
    print(json.dumps(out, indent=1))
