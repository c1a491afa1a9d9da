"""Frames per second of ``crossview.stereo_stream`` at 640x480 with the default model
(matchstereo-hybrid, every default: fused with SGBM, warm start on), on a synthetic street
driven forward (warm_start.py's first sequence, 480x640). The first frame (model and first-run
costs) is not counted.

    python docs/results/stereo-video/fps.py --threads 2 --out docs/results/stereo-video/fps.json \
        [--preset balanced]
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

import torch

import crossview

sys.path.insert(0, str(Path(__file__).resolve().parent))
from warm_start import street_sequence


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--preset", choices=["fast", "balanced", "best"])
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    frames = street_sequence(0)
    runs = {}
    for warm in (True, False):
        stream = crossview.stereo_stream(((f["left"], f["right"]) for f in frames),
                                         warm_start=warm, preset=args.preset)
        next(stream)
        start = time.perf_counter()
        count = sum(1 for _ in stream)
        seconds = time.perf_counter() - start
        runs["warm" if warm else "cold"] = {"frames": count, "seconds": seconds,
                                            "fps": count / seconds}
        print(f"{'warm' if warm else 'cold'}: {count} frames of 640x480 in {seconds:.2f} s: "
              f"{count / seconds:.2f} frames/s ({args.threads} threads)", flush=True)
    args.out.write_text(json.dumps({"threads": args.threads, "size": [480, 640],
                                    "model": "matchstereo-hybrid", "preset": args.preset,
                                    "load_average": os.getloadavg(), "runs": runs},
                                   indent=1) + "\n")


if __name__ == "__main__":
    main()
