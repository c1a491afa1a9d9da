"""What the mirrored second run costs (item 15): ``crossview.estimate_disparity`` on the KITTI
development pair (376x1241) fused (the default), unfused (``--no-fuse``) and self-fused
(``--self-fuse``: two network runs), one model, two torch threads, one warm-up each, then five
rounds of the three modes in turn; medians and their ratios to ``--no-fuse`` in one run (this
machine is shared: compare the ratios, not the seconds across runs).

Run: ``OMP_NUM_THREADS=2 python docs/results/network-alone/self_fuse_timing.py OUT.json``
"""

from __future__ import annotations

import json
import sys
import time

import numpy as np
import torch

import crossview
from crossview.data.io import read_image

PAIR = "../shared/real-dev/kitti2012_000070"
MODES = {"default (fused)": {}, "--no-fuse": {"fuse": False}, "--self-fuse": {"self_fuse": True}}


def main(out: str) -> None:
    torch.set_num_threads(2)
    left, right = read_image(f"{PAIR}/left.png"), read_image(f"{PAIR}/right.png")
    model = crossview.load_model("matchstereo-hybrid")
    for options in MODES.values():  # warm-up
        crossview.estimate_disparity(left, right, model=model, **options)
    times: dict[str, list[float]] = {mode: [] for mode in MODES}
    for _ in range(5):
        for mode, options in MODES.items():
            start = time.perf_counter()
            crossview.estimate_disparity(left, right, model=model, **options)
            times[mode].append(time.perf_counter() - start)
    median = {mode: float(np.median(t)) for mode, t in times.items()}
    for mode, seconds in median.items():
        print(f"{mode}: {seconds:.3f} s, {seconds / median['--no-fuse']:.2f} x --no-fuse")
    with open(out, "w") as handle:
        json.dump({"pair": PAIR, "size": list(left.shape[:2]), "threads": 2,
                   "median_s": median, "all_s": times}, handle, indent=1)


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    main(sys.argv[1])
