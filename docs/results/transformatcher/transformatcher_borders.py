"""Why keypoints near the image borders score worse, measured on the held-out warps.

With the bundled weights, for the raw correlation's hard arg-max and the refined model:

- ``samplers``: PCK@0.05 / @0.1, all keypoints and split into *border* (source keypoint within
  48 px of an image side) and *inside*, for the published soft sampler (Eq. 11, the target
  positions of the cells averaged), the same kernel averaging the cells' *displacements* (no
  pull of the cells' centroid towards the image inside) at ``tau`` 0.02 / 0.05 / 0.1, and
  bilinear interpolation of the displacements; the oracle (exact correspondence at the cells)
  shows what each sampler loses by itself.
- ``bias_by_target``: mean signed error (pixels) and PCK@0.05 per band of the *true target*
  position, per axis.
- ``bias_correction_bound``: PCK@0.05 after subtracting, per axis and per 8-px band of the
  predicted position, the mean error measured on this same set: an upper bound on what any
  position-dependent bias correction could add.
- ``by_displacement``: PCK@0.05 per band of the true displacement length, border vs inside.
- ``padded``: the whole pipeline on images reflect-padded by 16 px (272 px, a 17 x 17 grid,
  1.65x the matches), keypoints mapped in and out.

Run: ``OMP_NUM_THREADS=1 python docs/results/transformatcher/transformatcher_borders.py [PAIRS]``
(default 96; writes ``docs/results/transformatcher/transformatcher_borders.json``).
"""

from __future__ import annotations

import json
import sys
from collections.abc import Callable
from pathlib import Path

import torch
import torch.nn.functional as F
from safetensors.torch import load_file

from crossview.data.synthetic.warp_batches import warp_batch, warp_dataset
from crossview.models.keypoints.coordinates import (
    grid_centres,
    normalised_to_pixels,
    pixels_to_normalised,
)
from crossview.models.transformatcher.inference import WEIGHTS
from crossview.models.transformatcher.loss import oracle_coords
from crossview.models.transformatcher.model import EVAL_TAU, TransforMatcher, raw_argmax_coords
from crossview.models.transformatcher.softargmax import soft_sample

SIZE = 240
BORDER_PX = 48
PAD = 16
THRESHOLDS = {"pck@0.05": 0.05 * SIZE, "pck@0.1": 0.1 * SIZE}
TARGET_BANDS = ((0, 24), (24, 48), (48, 96), (96, 144), (144, 192), (192, 216), (216, 240))
DISPLACEMENT_BANDS = ((0, 10), (10, 20), (20, 30), (30, 50))

Sampler = Callable[[torch.Tensor, torch.Tensor, float, float], torch.Tensor]


def coordinate_average(coords: torch.Tensor, kp: torch.Tensor, tau: float,
                       shift: float) -> torch.Tensor:
    """The published soft sampler (what :meth:`TransforMatcher.transfer` does)."""
    return (soft_sample(coords, kp + shift, tau) - shift).clamp(-1, 1)


def displacement_average(coords: torch.Tensor, kp: torch.Tensor, tau: float,
                         shift: float) -> torch.Tensor:
    """The same kernel over the cells' displacements, added to the keypoint."""
    g = coords.shape[1]
    return (kp + soft_sample(coords - grid_centres(g, g), kp + shift, tau)).clamp(-1, 1)


def displacement_bilinear(coords: torch.Tensor, kp: torch.Tensor, tau: float,
                          shift: float) -> torch.Tensor:
    """Bilinear interpolation of the cells' displacements (``tau`` unused)."""
    g = coords.shape[1]
    disp = (coords - grid_centres(g, g)).permute(0, 3, 1, 2)
    at = F.grid_sample(disp, (kp + shift).unsqueeze(1), mode="bilinear",
                       padding_mode="border", align_corners=False)
    return (kp + at[:, :, 0].transpose(1, 2)).clamp(-1, 1)


def pck(err: torch.Tensor, mask: torch.Tensor | None = None) -> dict[str, float]:
    """PCK in percent of the pixel errors ``err`` (optionally where ``mask``)."""
    err = err if mask is None else err[mask]
    return {name: round(100 * (err <= t).float().mean().item(), 2)
            for name, t in THRESHOLDS.items()}


def split(err: torch.Tensor, border: torch.Tensor) -> dict[str, dict[str, float]]:
    return {"all": pck(err), "border": pck(err, border), "inside": pck(err, ~border)}


@torch.no_grad()
def run_model(model: TransforMatcher, pairs: int, pad: int = 0) -> dict[str, torch.Tensor]:
    """Raw and refined ``coords`` (and, unpadded, the oracle's) of the held-out warps, with the
    pixel keypoints; with ``pad``, the images are reflect-padded first."""
    data = warp_dataset("heldout", SIZE, pairs, 0, 32)
    names = ("raw", "refined", "kp", "kpt") + (() if pad else ("oracle",))
    out: dict[str, list[torch.Tensor]] = {k: [] for k in names}
    for start in range(0, pairs, 4):
        b = warp_batch(data, list(range(start, min(pairs, start + 4))))
        images = [F.pad(b[k], (pad,) * 4, mode="reflect") if pad else b[k]
                  for k in ("src", "tgt")]
        result = model(*images)
        out["raw"].append(raw_argmax_coords(result["corr"], model.upsample))
        out["refined"].append(result["coords"])
        if not pad:
            out["oracle"].append(oracle_coords(b["flow"], result["coords"].shape[1],
                                               model.frame_shift))
        out["kp"].append(b["kp_src"])
        out["kpt"].append(b["kp_tgt"])
    return {k: torch.cat(v) for k, v in out.items()}


def errors(model: TransforMatcher, coords: torch.Tensor, kp: torch.Tensor, kpt: torch.Tensor,
           sampler: Sampler = coordinate_average, tau: float = EVAL_TAU,
           pad: int = 0) -> tuple[torch.Tensor, torch.Tensor]:
    """Pixel error lengths ``[B, N]`` and signed error vectors ``[B, N, 2]`` of a transfer."""
    size = model.image_size
    pred = normalised_to_pixels(
        sampler(coords, pixels_to_normalised(kp + pad, size, size), tau, model.frame_shift),
        size, size) - pad
    delta = pred.clamp(0, SIZE - 1) - kpt
    return delta.norm(dim=-1), delta


def main(pairs: int) -> dict:
    torch.set_num_threads(1)
    heads = load_file(str(WEIGHTS))
    model = TransforMatcher(grid=SIZE // 16).eval()
    model.load_trained_state_dict(heads)
    run = run_model(model, pairs)
    kp, kpt = run["kp"], run["kpt"]
    border = (kp.min(-1).values < BORDER_PX) | (kp.max(-1).values > SIZE - 1 - BORDER_PX)
    report: dict = {"pairs": pairs, "keypoints": border.numel(),
                    "border_fraction": round(border.float().mean().item(), 3),
                    "samplers": {}, "bias_by_target": {}, "bias_correction_bound": {},
                    "by_displacement": {}}
    samplers = [("coordinate_average", coordinate_average, (EVAL_TAU,)),
                ("displacement_average", displacement_average, (0.02, 0.05, 0.1)),
                ("displacement_bilinear", displacement_bilinear, (EVAL_TAU,))]
    for name in ("raw", "refined", "oracle"):
        for sampler_name, sampler, taus in samplers:
            for tau in taus:
                err, _ = errors(model, run[name], kp, kpt, sampler, tau)
                report["samplers"][f"{name}/{sampler_name}/tau={tau:g}"] = split(err, border)
    displacement = (kpt - kp).norm(dim=-1)
    for name in ("raw", "refined"):
        err, delta = errors(model, run[name], kp, kpt)
        bands = {}
        for axis, label in ((0, "x"), (1, "y")):
            for lo, hi in TARGET_BANDS:
                sel = (kpt[..., axis] >= lo) & (kpt[..., axis] < hi)
                mean = delta[..., axis][sel].mean().item()
                bands[f"{label} {lo}-{hi}"] = {"n": int(sel.sum()),
                                               "mean_error_px": round(mean, 2), **pck(err, sel)}
        report["bias_by_target"][name] = bands
        corrected = delta.clone()
        pred = kpt + delta
        for axis in (0, 1):
            band = torch.div(pred[..., axis] + 8, 8, rounding_mode="floor")
            for value in band.unique():
                sel = band == value
                corrected[..., axis][sel] -= delta[..., axis][sel].mean()
        report["bias_correction_bound"][name] = {"before": pck(err)["pck@0.05"],
                                                 "after": pck(corrected.norm(dim=-1))["pck@0.05"]}
        report["by_displacement"][name] = {
            f"{lo}-{hi} px": {where: {"n": int((sel & mask).sum()),
                                      **pck(err, sel & mask)}
                              for where, mask in (("border", border), ("inside", ~border))}
            for lo, hi in DISPLACEMENT_BANDS
            for sel in [(displacement >= lo) & (displacement < hi)]}
    padded = TransforMatcher(grid=(SIZE + 2 * PAD) // 16).eval()
    padded.load_trained_state_dict(heads)
    run_padded = run_model(padded, pairs, PAD)
    report["padded"] = {name: split(errors(padded, run_padded[name], kp, kpt, pad=PAD)[0], border)
                        for name in ("raw", "refined")}
    return report


if __name__ == "__main__":
    result = main(int(sys.argv[1]) if len(sys.argv) > 1 else 96)
    path = Path(__file__).with_name("transformatcher_borders.json")
    path.write_text(json.dumps(result, indent=1) + "\n")
    print(json.dumps({k: result[k] for k in ("border_fraction", "bias_correction_bound",
                                             "padded")}, indent=1))
    print(f"wrote {path}")
