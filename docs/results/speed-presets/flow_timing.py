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
from pathlib import Path

import torch
from flow_presets import settings, with_fields
from speed_timing import images_at, timing_rows

import crossview
from crossview.models.dense.classical import dis_flow
from crossview.report import print_table, write_json

DIS = "DIS medium"


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
    names = ("frame0", "frame1") if (args.scene / "frame0.png").is_file() else ("left", "right")
    rows = []
    for size in args.size:
        frames = images_at(args.scene, names, tuple(int(v) for v in size.split("x")))
        rows += timing_rows(model, frames, "flow", grid, dis_flow, args.repeats, size, "vs_dis")
        write_json(args.out, {"scene": str(args.scene), "threads": torch.get_num_threads(),
                              "repeats": args.repeats, "rows": rows})
    print_table(f"time per pair, {torch.get_num_threads()} threads, median of {args.repeats}",
                ["size", "setting", "median s", "x DIS"],
                [[r["size"], r["setting"], f"{r['median_s']:.3f}", f"{r['vs_dis']:.1f}"]
                 for r in rows])


if __name__ == "__main__":
    main()
