"""Frames per second of ``crossview.stereo_stream`` at 640x480 with the default model
(matchstereo-hybrid, every default: fused with SGBM, warm start on), on a synthetic street
driven forward (warm_start.py's first sequence, 480x640): warm, cold, and warm with the rows'
offset measured on every frame, taking turns for ``--rounds`` rounds (the median kept). The
first frame of each stream (first-run costs, the rows' measure) is not counted.

    python docs/results/stereo-video/fps.py --threads 2 --out docs/results/stereo-video/fps.json \
        [--preset balanced] [--rounds 3]
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

import numpy as np
import torch

import crossview
from crossview.api import ROWS_MEASURED_EVERY

sys.path.insert(0, str(Path(__file__).resolve().parent))
from warm_start import street_sequence

# the streams timed: (name, warm_start, rows_every); "warm, rows each frame" is how streams ran
# before the rows' offset was measured once every ROWS_MEASURED_EVERY frames
STREAMS = (("warm", True, ROWS_MEASURED_EVERY),
           ("cold", False, ROWS_MEASURED_EVERY),
           ("warm, rows each frame", True, 1))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--preset", choices=["fast", "balanced", "best"])
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    frames = street_sequence(0)
    model = crossview.load_model("matchstereo-hybrid")
    fps: dict[str, list[float]] = {name: [] for name, _, _ in STREAMS}
    for _ in range(args.rounds):  # the streams take turns: a slow moment hits each alike
        for name, warm, rows_every in STREAMS:
            stream = crossview.stereo_stream(((f["left"], f["right"]) for f in frames),
                                             model=model, warm_start=warm,
                                             rows_every=rows_every, preset=args.preset)
            next(stream)
            start = time.perf_counter()
            count = sum(1 for _ in stream)
            fps[name].append(count / (time.perf_counter() - start))
    runs = {name: {"frames": len(frames) - 1, "fps": float(np.median(values)),
                   "fps_rounds": values} for name, values in fps.items()}
    for name, run in runs.items():
        print(f"{name}: {run['frames']} frames of 640x480, median of {args.rounds} rounds: "
              f"{run['fps']:.2f} frames/s ({args.threads} threads)", flush=True)
    args.out.write_text(json.dumps({"threads": args.threads, "size": [480, 640],
                                    "model": "matchstereo-hybrid", "preset": args.preset,
                                    "rounds": args.rounds, "load_average": os.getloadavg(),
                                    "runs": runs}, indent=1) + "\n")


if __name__ == "__main__":
    main()
