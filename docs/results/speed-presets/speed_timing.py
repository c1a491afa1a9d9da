"""Time per pair of each setting of ``speed_settings.py`` (the network's scale, the fusion's
SGBM runs and median passes), with OpenCV SGBM (filled) timed in the same run, so that each
time is also a ratio to SGBM's on the same machine at the same moment.

Each setting runs :func:`crossview.models.dense.inference.predict_fields` of the bundled
``matchstereo-hybrid`` with its ``fused_network`` set to the setting (what a preset does), on
the left/right pair of each scene folder given, resized to each ``--size``; the repeats go
round all settings in turn (a slow moment of a shared machine hits every setting alike) and the
median is kept. SGBM is :func:`crossview.models.dense.classical.sgbm_disparity` (3-way, 128
disparities) with its holes filled along the rows (the development tables' "SGBM filled").

Run: ``OMP_NUM_THREADS=2 python docs/results/speed-presets/speed_timing.py OUT.json
../shared/real-dev/kitti2012_000070 --size 375x1242 --size 480x640``
"""

from __future__ import annotations

import argparse
import dataclasses
import itertools
import time
from pathlib import Path

import numpy as np
import torch
from PIL import Image
from speed_settings import MEDIANS, RUNS, SCALES

import crossview
from crossview.models.dense import inference
from crossview.models.dense.classical import fill_holes, sgbm_disparity
from crossview.report import print_table, write_json

SGBM = "SGBM filled"


def pair_at(folder: Path, size: tuple[int, int]) -> tuple[np.ndarray, np.ndarray]:
    """The scene's left and right images ``[H, W, 3]`` uint8, resized to ``size = (H, W)``."""
    return tuple(np.asarray(Image.open(folder / f"{view}.png").convert("RGB").resize(
        size[::-1], Image.Resampling.BICUBIC)) for view in ("left", "right"))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("out", type=Path)
    parser.add_argument("scene", type=Path)
    parser.add_argument("--size", action="append", required=True)
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    model = crossview.load_model("matchstereo-hybrid")
    shipped = model.fused_network
    settings = {SGBM: None} | {
        f"scale{scale}_{runs}_{medians}": dataclasses.replace(
            shipped, scale=scale, classical_runs=len(RUNS[runs]),
            median_passes=MEDIANS[medians])
        for scale, runs, medians in itertools.product(SCALES, RUNS, MEDIANS)}
    rows = []
    for size_text in args.size:
        size = tuple(int(v) for v in size_text.split("x"))
        left, right = pair_at(args.scene, size)
        times: dict[str, list[float]] = {name: [] for name in settings}
        for _ in range(args.repeats):
            for name, setting in settings.items():
                start = time.perf_counter()
                if setting is None:
                    fill_holes(sgbm_disparity(left, right, 128))
                else:
                    model.fused_network = setting
                    inference.predict_fields(model, left, right, "stereo")
                times[name].append(time.perf_counter() - start)
        model.fused_network = shipped
        sgbm = float(np.median(times[SGBM]))
        for name, measured in times.items():
            median = float(np.median(measured))
            rows.append({"size": size_text, "setting": name, "median_s": median,
                         "times_s": measured, "vs_sgbm": median / sgbm})
        write_json(args.out, {"scene": str(args.scene), "threads": torch.get_num_threads(),
                              "repeats": args.repeats, "rows": rows})
    print_table(f"time per pair, {torch.get_num_threads()} threads, median of {args.repeats}",
                ["size", "setting", "median s", "x SGBM filled"],
                [[r["size"], r["setting"], f"{r['median_s']:.3f}", f"{r['vs_sgbm']:.2f}"]
                 for r in rows])


if __name__ == "__main__":
    main()
