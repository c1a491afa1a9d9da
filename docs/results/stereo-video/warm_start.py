"""Warm start against cold frames on short stereo sequences (issue 49 item 3).

Two kinds of sequences, each of FRAMES frames:

- synthetic streets (crossview.data.synthetic, held-out textures): a street scene seen by the
  rectified pair as it drives forward, STEP times the nearest point's depth per frame; ground
  truth rendered with the frames;
- real pairs from ../shared/real-train/ made into sequences: a CROP window moving DX px right
  and DY px down per frame over both views (a camera panning), the ground truth cropped the
  same way.

Every frame runs cold (the network's own initialisation) and warm (the previous frame's answer
of the same mode as the network's initial field: ``crossview.stereo_stream``), with the
default model fused with SGBM (as the command runs) and with its network alone
(``fuse=False``: its lri and refinement). Per frame: seconds of ``estimate_disparity`` and
bad-2 / EPE over the pixels with ground truth. Means over frames 1.. (frame 0 is cold in both).

    OMP_NUM_THREADS=1 python docs/results/stereo-video/warm_start.py \
        --out docs/results/stereo-video/warm_start.json
"""

from __future__ import annotations

import argparse
import json
import platform
import time
from pathlib import Path

import numpy as np
import torch

import crossview
from crossview.data.synthetic.scene import Camera, translation
from crossview.data.synthetic.stereo import StereoConfig, render_stereo, stereo_scene
from crossview.metrics.stereo import bad_pixels, endpoint_error

FRAMES = 8
STEP = 0.1  # synthetic: forward motion per frame, times the nearest point's depth
SIZE = (480, 640)  # synthetic frames (H, W)
STREETS = (0, 1, 2)  # seeds
REAL = ("mb2014q_piano", "mb2006h_baby1", "mb2005h_books", "mb2014q_recycle")  # 4 groups
CROP = (440, 560)  # real: window (H, W)
DX, DY = 5, 1  # real: window motion per frame, px
MODES = {"fused": {}, "network": {"fuse": False}}


def street_sequence(seed: int) -> list[dict[str, np.ndarray]]:
    """FRAMES frames of a street driven forward: left, right (uint8), gt, valid."""
    config = StereoConfig(size=SIZE, street_probability=1.0)
    layers, left, right, f, baseline = stereo_scene(np.random.default_rng(seed), config,
                                                    "heldout")
    first = render_stereo(layers, left, right, SIZE, f * baseline)
    step = STEP * f * baseline / float(first["disparity"].max())
    frames = []
    for i in range(FRAMES):
        moved = [Camera(c.K, translation([-offset, 0.0, -i * step]))
                 for c, offset in ((left, 0.0), (right, baseline))]
        s = render_stereo(layers, *moved, SIZE, f * baseline)
        frames.append({"left": s["image0"].clip(0, 255).astype(np.uint8),
                       "right": s["image1"].clip(0, 255).astype(np.uint8),
                       "gt": s["disparity"], "valid": s["valid"]})
    return frames


def real_sequence(root: Path, scene: str) -> list[dict[str, np.ndarray]]:
    """FRAMES crops of a real pair, the window moving (DX, DY) px per frame."""
    left = crossview.api.read_image(root / scene / "left.png")
    right = crossview.api.read_image(root / scene / "right.png")
    gt = np.load(root / scene / "gt.npy")
    h, w = CROP
    frames = []
    for i in range(FRAMES):
        y, x = i * DY, i * DX
        window = np.s_[y:y + h, x:x + w]
        frames.append({"left": left[window], "right": right[window], "gt": gt[window],
                       "valid": np.isfinite(gt[window])})
    return frames


def run(model: torch.nn.Module, frames: list[dict[str, np.ndarray]], warm: bool,
        options: dict) -> list[dict[str, float]]:
    rows = []
    pairs = ((f["left"], f["right"]) for f in frames)
    stream = crossview.stereo_stream(pairs, model=model, warm_start=warm, **options)
    for frame in frames:
        start = time.perf_counter()
        result = next(stream)
        seconds = time.perf_counter() - start
        disparity = result.disparity[0].numpy()
        rows.append({"seconds": seconds,
                     "bad2": bad_pixels(disparity, frame["gt"], frame["valid"], 2.0).value,
                     "epe": endpoint_error(disparity, frame["gt"], frame["valid"]).value})
    return rows


def summary(rows: list[dict[str, float]]) -> dict[str, float]:
    later = rows[1:]  # frame 0 runs cold either way
    return {key: float(np.mean([r[key] for r in later])) for key in ("seconds", "bad2", "epe")}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--real-root", type=Path,
                        default=Path(__file__).resolve().parents[4] / "shared" / "real-train")
    args = parser.parse_args()
    model = crossview.load_model("matchstereo-hybrid")
    sequences = {f"street{seed}": street_sequence(seed) for seed in STREETS}
    sequences.update({scene: real_sequence(args.real_root, scene) for scene in REAL})
    results = {}
    warmup = sequences[next(iter(sequences))][0]
    crossview.estimate_disparity(warmup["left"], warmup["right"], model=model)  # first-run costs
    for name, frames in sequences.items():
        for mode, options in MODES.items():
            for warm in (False, True):
                rows = run(model, frames, warm, options)
                key = f"{name}/{mode}/{'warm' if warm else 'cold'}"
                results[key] = {"frames": rows, "mean_after_first": summary(rows)}
                s = results[key]["mean_after_first"]
                print(f"{key:36s} {s['seconds']:.2f} s  bad-2 {s['bad2']:.2f} %  "
                      f"EPE {s['epe']:.2f} px", flush=True)
    table = {}
    for mode in MODES:
        for kind, names in (("synthetic", [f"street{s}" for s in STREETS]), ("real", REAL)):
            for start in ("cold", "warm"):
                means = [results[f"{n}/{mode}/{start}"]["mean_after_first"] for n in names]
                table[f"{kind}/{mode}/{start}"] = {
                    key: float(np.mean([m[key] for m in means]))
                    for key in ("seconds", "bad2", "epe")}
    for key, s in table.items():
        print(f"{key:28s} {s['seconds']:.2f} s  bad-2 {s['bad2']:.2f} %  EPE {s['epe']:.2f} px")
    args.out.write_text(json.dumps({
        "settings": {"frames": FRAMES, "step": STEP, "size": SIZE, "streets": STREETS,
                     "real": REAL, "crop": CROP, "dx": DX, "dy": DY,
                     "model": "matchstereo-hybrid", "threads": torch.get_num_threads(),
                     "cpu": platform.processor() or platform.machine(),
                     "torch": torch.__version__},
        "table": table, "sequences": results}, indent=1) + "\n")


if __name__ == "__main__":
    main()
