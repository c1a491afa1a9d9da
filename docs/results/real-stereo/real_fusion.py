"""The default stereo network fused with OpenCV SGBM, scored on real scenes, per scene and rule.

For every stereo scene under ROOT (``SCENES=a,b,...`` keeps only those), the bundled
``matchstereo-hybrid`` network runs with and without its photometric refinement (lri on, no
fusion), and SGBM (:mod:`crossview.models.dense.classical`) runs on both views with the search
range of :mod:`crossview.models.dense.sgbm_fusion` (from the network's largest disparity, no
ground truth). Settings, each a record in the format of ``real_inference_settings.py`` so that
``real_choice.py`` chooses by leave-one-group-out:

- ``net``: the network alone (the default before the fusion);
- ``sgbm-filled``: SGBM with Middlebury's hole filling (the classical answer);
- ``sgbm+net``: SGBM where it has a value, the network in all of SGBM's holes;
- ``fuse{T}``: :func:`~crossview.models.dense.sgbm_fusion.fuse_view` with the network's
  left-right consistency threshold T px (the shipped rule at ``T`` =
  :data:`~crossview.models.dense.sgbm_fusion.FUSION_CONSISTENCY_PX`).

each with the refined and the unrefined network (``refine`` in the record).

Run: ``OMP_NUM_THREADS=2 python docs/results/real-stereo/real_fusion.py OUT.json ROOT``
"""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path

import numpy as np

import crossview
from crossview.data.datasets.scenes import SceneFolders
from crossview.geometry.consistency import noc_mask
from crossview.geometry.disparity import field_to_disparity
from crossview.models.dense.classical import (
    fill_holes,
    sgbm_disparity,
    sgbm_num_disparities,
    sgbm_right_disparity,
)
from crossview.models.dense.inference import predict_fields
from crossview.models.dense.sgbm_fusion import fuse_view
from crossview.report import write_json

sys.path.insert(0, str(Path(__file__).parent))
from real_inference_settings import scores  # the scoring of the settings script

THRESHOLDS_PX = (0.5, 1.0, 2.0)


def settings(field: np.ndarray, left: np.ndarray, right: np.ndarray
             ) -> tuple[dict[str, np.ndarray], float]:
    """``{setting: left disparity [H, W]}`` from the network's fields ``[2, H, W, 2]`` (a
    tensor) and the RGB uint8 pair ``[H, W, 3]``; and SGBM's seconds (both views)."""
    net = field_to_disparity(field[:1])[0].numpy()
    net_right = field_to_disparity(field[1:], "right")[0].numpy()
    search = sgbm_num_disparities(float(max(net.max(), net_right.max())))
    start = time.perf_counter()
    sgbm = sgbm_disparity(left, right, search)
    sgbm_right_disparity(left, right, search)  # timed as the fusion runs it
    seconds = time.perf_counter() - start
    hole = ~np.isfinite(sgbm)
    out = {"net": net, "sgbm-filled": fill_holes(sgbm), "sgbm+net": np.where(hole, net, sgbm)}
    for t in THRESHOLDS_PX:
        out[f"fuse{t:g}"] = fuse_view(net, noc_mask(field, t)[0].numpy(), sgbm)
    return out, seconds


def main(out: Path, root: str, only: set[str]) -> None:
    model = crossview.load_model("matchstereo-hybrid")
    scenes = SceneFolders(root, task="stereo")
    records = []
    for index, name in enumerate(scenes.names()):
        if only and name not in only:
            continue
        sample = scenes[index]
        for refine in (True, False):
            start = time.perf_counter()
            field = predict_fields(model, sample["image0"], sample["image1"], "stereo",
                                   refine=refine, fuse=False).field
            seconds_net = time.perf_counter() - start
            disparities, seconds_sgbm = settings(field, sample["image0"], sample["image1"])
            for setting, disparity in disparities.items():
                records.append({"root": root, "scene": name, "setting": setting,
                                "refine": refine, "seconds_net": seconds_net,
                                "seconds_sgbm": seconds_sgbm,
                                **scores(disparity, sample["disparity"], sample["valid"])})
        print(name, {f"{r['setting']}{'' if r['refine'] else '-'}": round(r["bad2"], 1)
                     for r in records if r["scene"] == name}, flush=True)
        write_json(out, {"weights": "bundled", "records": records})


if __name__ == "__main__":
    main(Path(sys.argv[1]), sys.argv[2], set(os.environ.get("SCENES", "").split(",")) - {""})
