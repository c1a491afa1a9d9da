"""Time per pair of each flow setting of ``flow_presets.py`` (the network's scale, lri and
refinement, the DIS fusion's runs and median passes), with OpenCV DIS (medium preset) timed in
the same run, so that each time is also a ratio to DIS's on the same machine at the same moment.

Each setting runs :func:`crossview.models.dense.inference.predict_fields` of the bundled
``matchflow-hybrid`` with its ``fused_network`` set to the setting (what a preset does), on
the two frames of a scene folder (``frame0.png``, ``frame1.png``, else ``left.png``,
``right.png``) resized to each ``--size``; the repeats go round all settings in turn (a slow
moment of a shared machine hits every setting alike) and the median is kept. DIS is
:func:`crossview.models.dense.classical.dis_flow`, what users compare against.

Run: ``OMP_NUM_THREADS=2 python docs/results/speed-presets/flow_timing.py OUT.json
../shared/real-dev/kitti2012_flow_000045 --size 375x1242 --size 480x640``
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

import numpy as np
import torch
from flow_presets import settings, with_fields
from PIL import Image

import crossview
from crossview.models.dense import inference
from crossview.models.dense.classical import dis_flow
from crossview.report import print_table, write_json

DIS = "DIS medium"


def frames_at(folder: Path, size: tuple[int, int]) -> tuple[np.ndarray, np.ndarray]:
    """The scene's two frames ``[H, W, 3]`` uint8, resized to ``size = (H, W)``."""
    names = ("frame0", "frame1") if (folder / "frame0.png").is_file() else ("left", "right")
    return tuple(np.asarray(Image.open(folder / f"{name}.png").convert("RGB").resize(
        size[::-1], Image.Resampling.BICUBIC)) for name in names)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("out", type=Path)
    parser.add_argument("scene", type=Path)
    parser.add_argument("--size", action="append", required=True)
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    model = crossview.load_model("matchflow-hybrid")
    own = model.fused_network
    grid = {DIS: None} | {name: with_fields(own, fields) for name, fields in settings().items()}
    rows = []
    for size_text in args.size:
        size = tuple(int(v) for v in size_text.split("x"))
        frame0, frame1 = frames_at(args.scene, size)
        times: dict[str, list[float]] = {name: [] for name in grid}
        for _ in range(args.repeats):
            for name, setting in grid.items():
                start = time.perf_counter()
                if setting is None:
                    dis_flow(frame0, frame1)
                else:
                    model.fused_network = setting
                    inference.predict_fields(model, frame0, frame1, "flow")
                times[name].append(time.perf_counter() - start)
        model.fused_network = own
        dis = float(np.median(times[DIS]))
        for name, measured in times.items():
            median = float(np.median(measured))
            rows.append({"size": size_text, "setting": name, "median_s": median,
                         "times_s": measured, "vs_dis": median / dis})
        write_json(args.out, {"scene": str(args.scene), "threads": torch.get_num_threads(),
                              "repeats": args.repeats, "rows": rows})
    print_table(f"time per pair, {torch.get_num_threads()} threads, median of {args.repeats}",
                ["size", "setting", "median s", "x DIS"],
                [[r["size"], r["setting"], f"{r['median_s']:.3f}", f"{r['vs_dis']:.1f}"]
                 for r in rows])


if __name__ == "__main__":
    main()
