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
from collections.abc import Callable
from pathlib import Path

import numpy as np
import torch
from PIL import Image
from speed_settings import MEDIANS, RUNS, SCALES

import crossview
from crossview.models.dense import inference
from crossview.models.dense.classical import fill_holes, sgbm_disparity
from crossview.models.registry import FusedNetwork
from crossview.report import print_table, write_json

SGBM = "SGBM filled"


def images_at(folder: Path, names: tuple[str, str], size: tuple[int, int]
              ) -> tuple[np.ndarray, np.ndarray]:
    """The scene's two images ``NAME.png`` ``[H, W, 3]`` uint8, resized to ``size = (H, W)``."""
    return tuple(np.asarray(Image.open(folder / f"{name}.png").convert("RGB").resize(
        size[::-1], Image.Resampling.BICUBIC)) for name in names)


def timing_rows(model: torch.nn.Module, images: tuple[np.ndarray, np.ndarray], task: str,
                settings: dict[str, FusedNetwork | None], classical: Callable[..., object],
                repeats: int, size: str, column: str) -> list[dict]:
    """One row per setting (``None``: ``classical(*images)``, the baseline) of its seconds
    per pair over ``repeats`` rounds, each round going through every setting in turn, the
    median and its ratio to the baseline's median (``column``)."""
    own = model.fused_network
    times: dict[str, list[float]] = {name: [] for name in settings}
    try:
        for _ in range(repeats):
            for name, setting in settings.items():
                start = time.perf_counter()
                if setting is None:
                    classical(*images)
                else:
                    model.fused_network = setting
                    inference.predict_fields(model, *images, task)
                times[name].append(time.perf_counter() - start)
    finally:
        model.fused_network = own
    baseline = float(np.median(next(t for n, t in times.items() if settings[n] is None)))
    return [{"size": size, "setting": name, "median_s": float(np.median(measured)),
             "times_s": measured, column: float(np.median(measured)) / baseline}
            for name, measured in times.items()]


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
    for size in args.size:
        images = images_at(args.scene, ("left", "right"), tuple(int(v) for v in size.split("x")))
        rows += timing_rows(model, images, "stereo", settings,
                            lambda left, right: fill_holes(sgbm_disparity(left, right, 128)),
                            args.repeats, size, "vs_sgbm")
        write_json(args.out, {"scene": str(args.scene), "threads": torch.get_num_threads(),
                              "repeats": args.repeats, "rows": rows})
    print_table(f"time per pair, {torch.get_num_threads()} threads, median of {args.repeats}",
                ["size", "setting", "median s", "x SGBM filled"],
                [[r["size"], r["setting"], f"{r['median_s']:.3f}", f"{r['vs_sgbm']:.2f}"]
                 for r in rows])


if __name__ == "__main__":
    main()
