"""The fused defaults' time with the colour-weighted median compiled against numpy's, in one
run: :func:`crossview.models.dense.inference.predict_fields` of the stereo pair (matchstereo-
hybrid) and the flow pair (matchflow-hybrid) at their own size, per preset, the two medians
taking turns at every repeat (a slow moment of a shared machine hits both alike); the median
of ``--repeats`` runs after one warm-up is kept. Each compiled run's output is checked equal to
numpy's, bit for bit.

Run: ``OMP_NUM_THREADS=2 python docs/results/speed-presets/compiled_median.py OUT.json
../shared/real-dev/kitti2012_000070 ../shared/real-dev/kitti2012_flow_000045 --repeats 7``
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

import numpy as np
import torch

import crossview
from crossview.data.datasets.scenes import FILES
from crossview.data.io import read_image
from crossview.defaults import PRESET_NAMES
from crossview.geometry import edge_weighted_median
from crossview.models.dense import inference
from crossview.report import print_table, write_json


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("out", type=Path)
    parser.add_argument("stereo", type=Path)
    parser.add_argument("flow", type=Path)
    parser.add_argument("--repeats", type=int, default=7)
    args = parser.parse_args()
    compiled = edge_weighted_median._compiled_median
    if compiled() is None:
        raise SystemExit("the C++ kernels do not build here: nothing to compare")
    medians = {"numpy": lambda: None, "compiled": compiled}
    rows, results = [], {}
    try:
        for task, scene, name in (("stereo", args.stereo, "matchstereo-hybrid"),
                                  ("flow", args.flow, "matchflow-hybrid")):
            model = crossview.load_model(name)
            # the scene folder's two images, named as the scenes dataset names them
            first, second = (read_image(scene / f"{stem}.png") for stem in FILES[task][:2])
            for preset in (None, *PRESET_NAMES):
                times: dict[str, list[float]] = {kind: [] for kind in medians}
                outputs = {}
                for _ in range(args.repeats + 1):
                    for kind, chooser in medians.items():
                        edge_weighted_median._compiled_median = chooser
                        start = time.perf_counter()
                        outputs[kind] = inference.predict_fields(model, first, second, task,
                                                                 preset=preset)
                        times[kind].append(time.perf_counter() - start)
                same = all(torch.equal(a, b) for a, b in zip(outputs["numpy"],
                                                             outputs["compiled"], strict=True)
                           if isinstance(a, torch.Tensor))
                seconds = {kind: float(np.median(t[1:])) for kind, t in times.items()}
                key = f"{task} {preset or 'default'}"
                results[key] = {**seconds, "identical": same}
                rows.append([key, f"{seconds['numpy']:.3f}", f"{seconds['compiled']:.3f}",
                             f"{seconds['numpy'] / seconds['compiled']:.2f}", str(same)])
    finally:
        edge_weighted_median._compiled_median = compiled
    write_json(args.out, {"stereo": str(args.stereo), "flow": str(args.flow),
                          "threads": torch.get_num_threads(), "repeats": args.repeats,
                          "seconds": results})
    print_table(f"s per pair, median of {args.repeats}, {torch.get_num_threads()} threads",
                ["task, preset", "numpy median", "compiled median", "ratio", "same output"],
                rows)


if __name__ == "__main__":
    main()
