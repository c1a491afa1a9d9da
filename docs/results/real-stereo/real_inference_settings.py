"""Inference settings of the default stereo model scored on real scenes, per scene.

For every stereo scene under each ROOT (``../shared/real-train``, ``../shared/real-dev``) and
every setting below, ``crossview.estimate_disparity`` with the bundled ``matchstereo-hybrid``
architecture (WEIGHTS: its bundled file, or a ``.safetensors`` of that architecture) is scored
as ``crossview eval`` scores scenes (bad-1/2/3 and EPE on the known pixels, a non-finite
prediction an error). Settings: ``native`` (the image as it is), ``lri`` (the paper's
low-resolution initialisation), ``scale0.75`` / ``scale1.25`` / ``scale1.5`` (run on the image
resized by that factor, the disparity scaled back), each with and without the photometric
refinement. The JSON holds one record per (scene, setting); choosing among the settings is
``real_choice.py``'s work (leave-one-group-out over the training scenes).

Run: ``OMP_NUM_THREADS=2 python docs/results/real-stereo/real_inference_settings.py OUT.json WEIGHTS
ROOT...``
(WEIGHTS ``bundled`` for the shipped file; ``SCENES=a,b,...`` in the environment keeps only
those scenes, ``SETTINGS=native,lri,...`` only those settings).
"""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path

import numpy as np
import torch
from rich.progress import track

import crossview
from crossview.data.datasets.scenes import SceneFolders
from crossview.report import write_json

SETTINGS = {"native": {}, "lri": {"lri": True}, "scale0.75": {"scale": 0.75},
            "scale1.25": {"scale": 1.25}, "scale1.5": {"scale": 1.5}}


def scores(disparity: np.ndarray, truth: np.ndarray, valid: np.ndarray) -> dict[str, float]:
    """bad-T % and EPE over the known pixels; a non-finite prediction is an error."""
    error = np.abs(np.where(np.isfinite(disparity), disparity, np.inf) - truth)[valid]
    finite = np.isfinite(error)
    out = {f"bad{t}": float(100 * np.mean(~finite | (error > t))) for t in (1, 2, 3)}
    out["epe"] = float(np.where(finite, error, truth[valid]).mean())
    return out


def run(model: torch.nn.Module, left: np.ndarray, right: np.ndarray, setting: dict,
        refine: bool) -> np.ndarray:
    h, w = left.shape[:2]
    size = None
    if "scale" in setting:
        size = (round(h * setting["scale"]), round(w * setting["scale"]))
    result = crossview.estimate_disparity(left, right, model=model, refine=refine,
                                          lri=setting.get("lri", False), size=size)
    return result.disparity[0].numpy()


def main(out: Path, weights: str, roots: list[str], only: set[str],
         settings: set[str]) -> None:
    model = crossview.load_model("matchstereo-hybrid",
                                 None if weights == "bundled" else weights)
    records = []
    for root in roots:
        scenes = SceneFolders(root, task="stereo")
        for index in track(range(len(scenes)), description=Path(root).name):
            if only and scenes.names()[index] not in only:
                continue
            sample = scenes[index]
            for name, setting in SETTINGS.items():
                if settings and name not in settings:
                    continue
                for refine in (True, False):
                    start = time.perf_counter()
                    disparity = run(model, sample["image0"], sample["image1"], setting, refine)
                    records.append({"root": str(root), "scene": sample["name"],
                                    "setting": name, "refine": refine,
                                    "seconds": time.perf_counter() - start,
                                    **scores(disparity, sample["disparity"], sample["valid"])})
            write_json(out, {"weights": weights, "records": records})


if __name__ == "__main__":
    scenes, settings = os.environ.get("SCENES", ""), os.environ.get("SETTINGS", "")
    main(Path(sys.argv[1]), sys.argv[2], sys.argv[3:], set(scenes.split(",")) - {""},
         set(settings.split(",")) - {""})
