"""The fused default stereo model deployed: ``crossview export onnx`` + ``crossview.runtime``
(numpy, OpenCV, onnxruntime; no torch) against ``crossview stereo`` on every development scene.

For every stereo scene under ROOT the bundled ``matchstereo-hybrid`` is exported at the scene's
size (``crossview export onnx --model matchstereo-hybrid --size HxW``: a file takes one size),
the file is run by :class:`crossview.runtime.FusedStereo`, and
:func:`crossview.models.dense.inference.predict_fields` (what ``crossview stereo`` runs, every
setting the model's default) runs on the same pair. Per scene: the mean and the largest
``|runtime - crossview|`` of the left disparity (px, all pixels), the share of pixels more than
0.5 px apart, the bad-2 of both (% of known pixels with an error above 2 px, as ``crossview
eval`` scores it) and the time of each (seconds on this machine, each the second of two runs
of the pair; the runtime's without loading its session, which is given apart).

``UPSCALE=1.5`` (default; 0: off) adds one pair beyond the fused run's 0.7 megapixels, the first
scene enlarged by that factor (bicubic), which both run at a working size (the shrinking is
torch's antialiased bilinear in crossview, the same weights in numpy in the runtime; until
2026-11-29 OpenCV's area resampling there) (no ground truth at that size: no bad-2).
``PRESET=fast`` (or ``balanced``, ``best``) exports and runs that speed preset instead of the
model's own settings (``fast`` works at 120,000 px: every scene runs at a working size).
``SELF_FUSE=1`` exports the network's self-fusion runs (``--self-fuse``) and compares
:class:`crossview.runtime.SelfFusedStereo` with ``crossview stereo --self-fuse`` (use with
``UPSCALE=0``: the self-fused run has no working size).

Run: ``OMP_NUM_THREADS=2 python docs/results/onnx-runtime/measure.py OUT.json
../shared/real-dev`` (``SCENES=a,b`` keeps only those scenes).
"""

from __future__ import annotations

import os
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import TypeVar

import cv2
import numpy as np
import onnxruntime

import crossview
from crossview.data.datasets.scenes import SceneFolders
from crossview.export.onnx import export_onnx
from crossview.geometry.disparity import field_to_disparity
from crossview.metrics.stereo import bad_pixels
from crossview.models.dense.inference import predict_fields
from crossview.report import write_json
from crossview.runtime import FusedStereo, SelfFusedStereo

MODEL = "matchstereo-hybrid"
PRESET = os.environ.get("PRESET") or None  # a speed preset; None: the model's own
SELF_FUSE = os.environ.get("SELF_FUSE") == "1"  # the self-fusion runs' file, fused
T = TypeVar("T")


def timed_twice(run: Callable[[], T]) -> tuple[T, float]:
    """``run()``'s result and the seconds of its second call (the first warms up: lazy
    initialisations, caches)."""
    run()
    start = time.perf_counter()
    result = run()
    return result, time.perf_counter() - start


def compare(model: object, name: str, left: np.ndarray, right: np.ndarray,
            truth: np.ndarray | None, folder: Path) -> dict:
    """One pair's row: export at its size, run both, compare (``truth``: ground truth
    ``[H, W]``, NaN unknown, or ``None``)."""
    size = left.shape[:2]
    path = folder / f"{name}.onnx"
    start = time.perf_counter()
    export_onnx(model, path, size, preset=PRESET, self_fuse=SELF_FUSE)
    export_s = time.perf_counter() - start
    start = time.perf_counter()
    stereo = SelfFusedStereo(path) if SELF_FUSE else FusedStereo(path)
    load_s = time.perf_counter() - start
    deployed, runtime_s = timed_twice(lambda: stereo(left, right).left)
    field, crossview_s = timed_twice(lambda: predict_fields(
        model, left, right, "stereo", preset=PRESET, self_fuse=SELF_FUSE).field)
    reference = field_to_disparity(field[0]).numpy()
    difference = np.abs(deployed.astype(np.float64) - reference)
    work = size if SELF_FUSE else stereo.file.working_size
    row = {"scene": name, "size": f"{size[0]}x{size[1]}",
           "working_size": f"{work[0]}x{work[1]}",
           "mean_abs_px": float(difference.mean()), "max_abs_px": float(difference.max()),
           "share_over_0.5px": float((difference > 0.5).mean()),
           "runtime_s": runtime_s, "crossview_s": crossview_s, "session_load_s": load_s,
           "export_s": export_s}
    if truth is not None:
        for key, disparity in (("runtime_bad2", deployed), ("crossview_bad2", reference)):
            row[key] = bad_pixels(disparity, truth, None, 2.0, count_holes=True).value
    print(" ".join(f"{k}={v:.4g}" if isinstance(v, float) else f"{k}={v}"
                   for k, v in row.items()), flush=True)
    return row


def main(out: Path, root: str) -> None:
    model = crossview.load_model(MODEL)
    keep = [s for s in os.environ.get("SCENES", "").split(",") if s]
    upscale = float(os.environ.get("UPSCALE", "1.5"))
    rows = []
    with tempfile.TemporaryDirectory() as folder:
        scenes = [s for s in SceneFolders(root, task="stereo") if not keep or s["name"] in keep]
        for scene in scenes:
            truth = np.where(scene["valid"], scene["disparity"], np.nan)
            rows.append(compare(model, scene["name"], scene["image0"], scene["image1"], truth,
                                Path(folder)))
        if upscale:
            first = scenes[0]
            h, w = first["image0"].shape[:2]
            size = (round(w * upscale), round(h * upscale))
            left, right = (cv2.resize(first[key], size, interpolation=cv2.INTER_CUBIC)
                           for key in ("image0", "image1"))
            rows.append(compare(model, f"{first['name']}_x{upscale:g}", left, right, None,
                                Path(folder)))
    dev = [row for row in rows if "runtime_bad2" in row]
    summary = {key: float(np.mean([row[key] for row in dev]))
               for key in ("mean_abs_px", "runtime_bad2", "crossview_bad2", "runtime_s",
                           "crossview_s")}
    summary["max_abs_px"] = max(row["max_abs_px"] for row in dev)
    write_json(out, {"model": MODEL, "preset": PRESET, "self_fuse": SELF_FUSE, "root": root,
                     "threads": os.environ.get("OMP_NUM_THREADS"),
                     "onnxruntime": onnxruntime.__version__,
                     "opencv": cv2.__version__, "rows": rows, "dev_mean": summary})
    print(f"dev mean: {summary}")


if __name__ == "__main__":
    main(Path(sys.argv[1]), sys.argv[2])
