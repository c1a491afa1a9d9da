"""The fast presets' working size: the whole fused run (rows, network, SGBM, fusion) on the pair
shrunk to at most ``max_pixels``, scored on real scenes and timed, for ``speed_choice.py``.

``fast`` and ``balanced`` (:data:`crossview.models.dense.presets.PRESETS`) run the network at 0.3
of the pair, which leaves SGBM and the fusion at the pair's own size the largest part of their
time at 480x640. Each setting here is one of those two presets' fusion, the network at 0.3 or
0.5 of the working size, with the model's ``fused_network.max_pixels`` (700,000: pairs above
it run whole at a working size, resized back) set to one of :data:`CAPS`. ``records`` scores
each setting's left view on every stereo scene of ROOT (bad-1/2/3 and EPE at the scene's own
size, as ``speed_settings.py`` records them); ``timing`` times them on a scene's pair resized to
each ``--size`` with SGBM (filled) in the same run (``speed_timing.py``'s rounds).
``speed_choice.py --add RECORDS TIMING`` chooses among them and the other settings.

Run:
    OMP_NUM_THREADS=2 python docs/results/speed-presets/working_size.py records OUT.json ROOT
    OMP_NUM_THREADS=2 python docs/results/speed-presets/working_size.py timing OUT.json \
        ../shared/real-dev/kitti2012_000070 --size 375x1242 --size 480x640 --repeats 7
"""

from __future__ import annotations

import argparse
import dataclasses
import sys
from pathlib import Path

import numpy as np
import torch
from speed_timing import SGBM, images_at, timing_rows

import crossview
from crossview.data.datasets.scenes import SceneFolders
from crossview.geometry.disparity import field_to_disparity
from crossview.models.dense import inference
from crossview.models.dense.classical import fill_holes, sgbm_disparity
from crossview.models.dense.presets import PRESETS
from crossview.models.registry import FusedNetwork
from crossview.report import print_table, write_json

sys.path.insert(0, str(Path(__file__).parents[1] / "real-stereo"))
from real_inference_settings import scores  # the scoring of the fusion studies

CAPS = (200_000, 150_000, 120_000, 100_000, 80_000, 60_000)
SCALES = (0.3, 0.5)  # the network's scale of the working size (fast and balanced: 0.3)
# the fusion's work: fast's (one SGBM run, no median) and balanced's (one run, both medians),
# named as speed_settings.py names them
WORK = {"rank_none": PRESETS["stereo"]["fast"], "rank_both": PRESETS["stereo"]["balanced"]}


def settings(shipped: FusedNetwork) -> dict[str, FusedNetwork]:
    """``{name: fused_network}``: each fusion of :data:`WORK` with the network at each of
    :data:`SCALES`, at each of :data:`CAPS`."""
    return {f"scale{scale}_{work}_cap{cap}": dataclasses.replace(
        shipped, **{**fields, "scale": scale, "max_pixels": cap})
        for work, fields in WORK.items() for scale in SCALES for cap in CAPS}


def records(out: Path, root: str) -> None:
    """Score every setting's left view on each stereo scene of ``root``; write as it goes."""
    model = crossview.load_model("matchstereo-hybrid")
    shipped = model.fused_network
    scenes = SceneFolders(root, task="stereo")
    rows = []
    for index, name in enumerate(scenes.names()):
        sample = scenes[index]
        truth, valid = sample["disparity"], np.asarray(sample["valid"], bool)
        for setting, fused in settings(shipped).items():
            model.fused_network = fused
            field = inference.predict_fields(model, sample["image0"], sample["image1"],
                                             "stereo").field
            left = field_to_disparity(field[:1])[0].numpy()
            rows.append({"root": root, "scene": name, "refine": True, "setting": setting,
                         "max_pixels": fused.max_pixels, "seconds": 0.0,
                         **scores(left, truth, valid)})
        model.fused_network = shipped
        print(name, {r["setting"]: round(r["bad2"], 2) for r in rows if r["scene"] == name},
              flush=True)
        write_json(out, {"weights": "bundled", "threads": torch.get_num_threads(),
                         "records": rows})


def timing(out: Path, scene: Path, sizes: list[str], repeats: int) -> None:
    """Seconds per pair of every setting at each size, SGBM filled in the same rounds."""
    model = crossview.load_model("matchstereo-hybrid")
    timed = {SGBM: None} | settings(model.fused_network)
    rows = []
    for size in sizes:
        images = images_at(scene, ("left", "right"), tuple(int(v) for v in size.split("x")))
        rows += timing_rows(model, images, "stereo", timed,
                            lambda left, right: fill_holes(sgbm_disparity(left, right, 128)),
                            repeats, size, "vs_sgbm")
        write_json(out, {"scene": str(scene), "threads": torch.get_num_threads(),
                         "repeats": repeats, "rows": rows})
    print_table(f"time per pair, {torch.get_num_threads()} threads, median of {repeats}",
                ["size", "setting", "median s", "x SGBM filled"],
                [[r["size"], r["setting"], f"{r['median_s']:.3f}", f"{r['vs_sgbm']:.2f}"]
                 for r in rows])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("mode", choices=["records", "timing"])
    parser.add_argument("out", type=Path)
    parser.add_argument("where", help="records: a folder of scenes; timing: one scene")
    parser.add_argument("--size", action="append", default=[])
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    if args.mode == "records":
        records(args.out, args.where)
    else:
        timing(args.out, Path(args.where), args.size or ["480x640"], args.repeats)


if __name__ == "__main__":
    main()
