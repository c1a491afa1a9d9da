"""Where the fused stereo default's time goes: each stage of
:func:`crossview.models.dense.inference.predict_fields` timed on one real pair, per preset.

Each stage function is wrapped with a timer for the run (wall seconds; the fusion's stages run
two at a time in its thread pool, so theirs are summed over both threads and can exceed the
fusion's own wall time). Stages: lining up the rows (OpenCV DIS on the pair shrunk to 0.25 MP),
the network, the consistency mask, toning the right image, the rank transforms, SGBM (left and
right views, all runs), the left-right checks, the row fill, the edge medians and the
out-of-view strip; ``fusion`` is the whole fusion's wall time. The median of ``--repeats`` runs
after one warm-up is kept, per stage.

Run: ``OMP_NUM_THREADS=2 python docs/results/speed-presets/profile.py OUT.json
../shared/real-dev/kitti2012_000070 [--repeats 5]``
"""

from __future__ import annotations

import argparse
import functools
import time
from collections import defaultdict
from collections.abc import Callable
from pathlib import Path

import numpy as np
import torch
from PIL import Image

import crossview
from crossview.defaults import PRESET_NAMES
from crossview.models.dense import inference, sgbm_fusion
from crossview.report import print_table, write_json

# (module, function, stage) of every timed stage
STAGES = [(inference, "row_offsets", "line up rows (DIS)"),
          (inference, "network_fields", "network"),
          (inference, "fuse_fields", "fusion (wall)"),
          (sgbm_fusion, "_consistent", "consistency mask"),
          (sgbm_fusion, "right_toned_to_left", "tone matching"),
          (sgbm_fusion, "rank_matching_image", "rank transform"),
          (sgbm_fusion, "sgbm_disparity", "SGBM left views (threads summed)"),
          (sgbm_fusion, "sgbm_right_disparity", "SGBM right views (threads summed)"),
          (sgbm_fusion, "left_right_checked", "left-right checks (threads summed)"),
          (sgbm_fusion, "fill_holes", "row fill (threads summed)"),
          (sgbm_fusion, "edge_weighted_median", "edge medians (threads summed)"),
          (sgbm_fusion, "extend_out_of_view", "out-of-view strip (threads summed)")]


def timed(function: Callable, stage: str, clock: dict[str, float]) -> Callable:
    @functools.wraps(function)
    def wrapper(*args, **kwargs):
        start = time.perf_counter()
        try:
            return function(*args, **kwargs)
        finally:
            clock[stage] += time.perf_counter() - start

    return wrapper


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("out", type=Path)
    parser.add_argument("scene", type=Path)
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()
    left, right = (np.asarray(Image.open(args.scene / f"{v}.png").convert("RGB"))
                   for v in ("left", "right"))
    model = crossview.load_model("matchstereo-hybrid")
    clock: dict[str, float] = defaultdict(float)
    originals = [(module, name, getattr(module, name)) for module, name, _ in STAGES]
    for module, name, stage in STAGES:
        setattr(module, name, timed(getattr(module, name), stage, clock))
    results = {}
    try:
        for preset in (None, *PRESET_NAMES):
            runs = []
            for _ in range(args.repeats + 1):
                clock.clear()
                start = time.perf_counter()
                inference.predict_fields(model, left, right, "stereo", preset=preset)
                runs.append({"total": time.perf_counter() - start, **clock})
            runs = runs[1:]
            results[preset or "default"] = {key: float(np.median([r.get(key, 0.0) for r in runs]))
                                            for key in runs[0]}
    finally:
        for module, name, original in originals:
            setattr(module, name, original)
    write_json(args.out, {"scene": str(args.scene), "size": list(left.shape[:2]),
                          "threads": torch.get_num_threads(), "repeats": args.repeats,
                          "seconds": results})
    keys = ["total"] + [stage for _, _, stage in STAGES]
    print_table(f"seconds per stage, {args.scene.name} {left.shape[0]}x{left.shape[1]}, "
                f"{torch.get_num_threads()} threads, median of {args.repeats}",
                ["stage", *results], [[key, *(f"{r.get(key, 0.0):.3f}" for r in results.values())]
                                      for key in keys])


if __name__ == "__main__":
    main()
