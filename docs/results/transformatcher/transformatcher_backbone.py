"""Where fine-tuning the backbone changes the held-out warps: border vs inside, and shrinkage.

For each weights file (label = file stem), on the held-out warps (seed 0, 32 keypoints a pair),
PCK@0.05 / @0.1 of the raw correlation's hard arg-max and of the refined model, over all
keypoints and split into *border* (source keypoint within 48 px of an image side) and *inside*
(the split of ``transformatcher_borders.py``, whose helpers this reuses), plus the same for the
raw arg-max of the untouched ImageNet backbone. ``shrink``: least-squares slope of the error on
the true displacement, per axis (``err_x ~ a dx + b x + c y + d`` over keypoints with an error
below 12 px; negative: displacements come out too short, see "The grid frame" in
docs/transformatcher.md).

Run: ``OMP_NUM_THREADS=1 python docs/results/transformatcher/transformatcher_backbone.py PAIRS
OUT.json WEIGHTS...``
"""

from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path

import torch

from crossview.models.transformatcher.inference import load_transformatcher
from crossview.models.transformatcher.model import TransforMatcher

_spec = importlib.util.spec_from_file_location(
    "transformatcher_borders", Path(__file__).with_name("transformatcher_borders.py"))
borders = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(borders)


def shrink(delta: torch.Tensor, kp: torch.Tensor, kpt: torch.Tensor) -> dict[str, float]:
    """Slope of the signed error on the true displacement per axis (near matches only)."""
    near = delta.norm(dim=-1) < 12
    disp, pos, err = (kpt - kp)[near], kp[near], delta[near]
    out = {}
    for axis, label in ((0, "x"), (1, "y")):
        design = torch.stack((disp[:, axis], pos[:, 0], pos[:, 1], torch.ones_like(pos[:, 0])), 1)
        coef = torch.linalg.lstsq(design.double(), err[:, axis:axis + 1].double()).solution
        out[label] = round(coef[0, 0].item(), 3)
    return out


def measure(model: TransforMatcher, pairs: int, names: tuple[str, ...]) -> dict:
    run = borders.run_model(model, pairs)
    kp, kpt = run["kp"], run["kpt"]
    border = (kp.min(-1).values < borders.BORDER_PX) | (
        kp.max(-1).values > borders.SIZE - 1 - borders.BORDER_PX)
    report = {}
    for name in names:
        err, delta = borders.errors(model, run[name], kp, kpt)
        report[name] = {**borders.split(err, border), "shrink": shrink(delta, kp, kpt)}
    return report


def main(pairs: int, files: list[str]) -> dict:
    torch.set_num_threads(1)
    result = {"pairs": pairs,
              "imagenet_backbone": measure(TransforMatcher().eval(), pairs, ("raw",))}
    for file in files:
        model = load_transformatcher(file)
        result[Path(file).stem] = {"backbone_tuned": model.backbone_tuned,
                                   **measure(model, pairs, ("raw", "refined"))}
    return result


if __name__ == "__main__":
    out = Path(sys.argv[2])
    report = main(int(sys.argv[1]), sys.argv[3:])
    out.write_text(json.dumps(report, indent=1) + "\n")
    print(json.dumps(report, indent=1))
