"""Two variants of the fused defaults timed in one run, their outputs compared: what
``compiled_median.py`` and ``opencv_threads.py`` measure.

:func:`time_variants` runs :func:`crossview.models.dense.inference.predict_fields` of the stereo
pair (matchstereo-hybrid) and the flow pair (matchflow-hybrid) at their own size, per preset,
the variants taking turns at every repeat (a slow moment of a shared machine hits each alike);
the median of the repeats after one warm-up is kept, and each variant's output is checked equal
to the first one's, bit for bit.
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np
import torch

import crossview
from crossview.data.datasets.scenes import FILES
from crossview.data.io import read_image
from crossview.defaults import PRESET_NAMES
from crossview.models.dense import inference
from crossview.report import print_table, write_json


def ab_arguments(doc: str) -> argparse.Namespace:
    """The command line of an A/B script (its docstring ``doc``): ``OUT.json STEREO_SCENE
    FLOW_SCENE [--repeats N]``."""
    parser = argparse.ArgumentParser(description=doc.splitlines()[0])
    parser.add_argument("out", type=Path)
    parser.add_argument("stereo", type=Path)
    parser.add_argument("flow", type=Path)
    parser.add_argument("--repeats", type=int, default=7)
    return parser.parse_args()


def time_variants(variants: dict[str, Callable[[], None]], stereo: Path, flow: Path,
                  repeats: int, out: Path) -> None:
    """Time each of ``variants`` (name -> a function that puts that variant in place; the
    caller restores the original afterwards) on ``stereo`` and ``flow`` scene folders; write
    the seconds and whether the outputs are equal to ``out`` and print a table."""
    names = list(variants)
    rows, results = [], {}
    for task, scene, model_name in (("stereo", stereo, "matchstereo-hybrid"),
                                    ("flow", flow, "matchflow-hybrid")):
        model = crossview.load_model(model_name)
        # the scene folder's two images, named as the scenes dataset names them
        first, second = (read_image(scene / f"{stem}.png") for stem in FILES[task][:2])
        for preset in (None, *PRESET_NAMES):
            times: dict[str, list[float]] = {name: [] for name in names}
            outputs = {}
            for _ in range(repeats + 1):
                for name, put_in_place in variants.items():
                    put_in_place()
                    start = time.perf_counter()
                    outputs[name] = inference.predict_fields(model, first, second, task,
                                                             preset=preset)
                    times[name].append(time.perf_counter() - start)
            same = all(torch.equal(a, b) for other in names[1:]
                       for a, b in zip(outputs[names[0]], outputs[other], strict=True)
                       if isinstance(a, torch.Tensor))
            seconds = {name: float(np.median(t[1:])) for name, t in times.items()}
            key = f"{task} {preset or 'default'}"
            results[key] = {**seconds, "identical": same}
            rows.append([key, *(f"{seconds[name]:.3f}" for name in names),
                         f"{seconds[names[0]] / seconds[names[-1]]:.2f}", str(same)])
    write_json(out, {"stereo": str(stereo), "flow": str(flow),
                     "threads": torch.get_num_threads(), "repeats": repeats,
                     "seconds": results})
    print_table(f"s per pair, median of {repeats}, {torch.get_num_threads()} threads",
                ["task, preset", *names, "ratio", "same output"], rows)
