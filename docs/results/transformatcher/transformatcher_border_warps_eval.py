"""Border vs inside, per band of true displacement, for weights trained with and without
``--shift``, on the held-out warps of ``semantic evaluate`` (seed 0, 32 keypoints a pair).

For each weights file (label = file stem), PCK@0.05 / @0.1 of the raw correlation's hard
arg-max and of the refined model, over all keypoints and split into *border* (source keypoint
within 48 px of an image side) and *inside*, and for the refined model the same split per band
of the true displacement length (0-10, 10-20, 20-30, 30-50 px): the split and helpers of
``transformatcher_borders.py``, for any weights file.

Run: ``OMP_NUM_THREADS=1 python docs/results/transformatcher/transformatcher_border_warps_eval.py
PAIRS OUT.json WEIGHTS...``
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import torch

from crossview.models.transformatcher.inference import load_transformatcher

sys.path.insert(0, str(Path(__file__).parent))
import transformatcher_borders as borders  # the script next to this one


def measure(file: str, pairs: int) -> dict:
    model = load_transformatcher(file)
    run = borders.run_model(model, pairs)
    kp, kpt = run["kp"], run["kpt"]
    border = (kp.min(-1).values < borders.BORDER_PX) | (
        kp.max(-1).values > borders.SIZE - 1 - borders.BORDER_PX)
    displacement = (kpt - kp).norm(dim=-1)
    report: dict = {}
    for name in ("raw", "refined"):
        err, _ = borders.errors(model, run[name], kp, kpt)
        report[name] = borders.split(err, border)
        if name == "refined":
            report["refined_by_displacement"] = {
                f"{lo}-{hi} px": {where: {"n": int((sel & mask).sum()),
                                          **borders.pck(err, sel & mask)}
                                  for where, mask in (("border", border), ("inside", ~border))}
                for lo, hi in borders.DISPLACEMENT_BANDS
                for sel in [(displacement >= lo) & (displacement < hi)]}
    return report


if __name__ == "__main__":
    torch.set_num_threads(1)
    pairs, out = int(sys.argv[1]), Path(sys.argv[2])
    result = {"pairs": pairs, **{Path(f).stem: measure(f, pairs) for f in sys.argv[3:]}}
    out.write_text(json.dumps(result, indent=1) + "\n")
    print(json.dumps(result, indent=1))
