"""The colour-weighted median along depth edges after the SGBM fusion, scored on real scenes.

For every stereo scene under ROOT (``SCENES=a,b,...`` keeps only those), the bundled
``matchstereo-hybrid`` network runs with its defaults but without the fusion (lri and the
refinement on), SGBM runs on the left view with the fusion's search range, and the left view is
fused by the rule of :func:`crossview.models.dense.sgbm_fusion.fuse_view` without the median
(setting ``rule``) and then filtered by
:func:`crossview.geometry.edge_weighted_median.edge_weighted_median` with each setting of the
grid below (``j{jump}_b{width}_r{radius}_s{step}_c{sigma_colour}``), and by cascades of two:
a wide sparse pass then a narrow dense one (``FIRST+SECOND``). Records in the format of
``real_inference_settings.py``, so that ``real_choice.py`` chooses by leave-one-group-out;
``seconds`` is the median's time for the left view (one thread of numpy). The time target
(a pair in 2 s on two cores, fusion included) leaves room for windows of 5 x 5 samples only
(0.04-0.15 s a view and pass at 375 x 1242): those settings are the ``records`` that
``real_choice.py`` reads; the windows of 11 x 11 and 9 x 9 samples (0.25-0.7 s) are kept apart
as ``costly`` to show what the budget gives up.

Run: ``OMP_NUM_THREADS=1 python docs/results/real-stereo/real_edge_median.py OUT.json ROOT``
"""

from __future__ import annotations

import itertools
import os
import sys
import time
from pathlib import Path

import numpy as np

import crossview
from crossview.data.datasets.scenes import SceneFolders
from crossview.geometry.consistency import noc_mask
from crossview.geometry.disparity import field_to_disparity
from crossview.geometry.edge_weighted_median import edge_weighted_median
from crossview.models.dense.classical import sgbm_disparity, sgbm_num_disparities
from crossview.models.dense.inference import predict_fields
from crossview.models.dense.sgbm_fusion import FUSION_CONSISTENCY_PX, fuse_view
from crossview.report import write_json

sys.path.insert(0, str(Path(__file__).parent))
from real_inference_settings import scores  # the scoring of the settings script

JUMPS_PX = (2.0, 4.0)
WINDOWS = ((2, 8, 4), (2, 10, 5), (3, 10, 5), (2, 12, 6))  # (width, radius, step): 5 x 5 samples
COSTLY_WINDOWS = ((2, 8, 2), (3, 10, 2))  # 9 x 9 and 11 x 11 samples
SIGMAS = (10.0, 20.0)
FIRSTS = ((2.0, 2, 12, 6, 20.0), (2.0, 3, 10, 5, 20.0), (2.0, 2, 10, 5, 20.0))
SECONDS = tuple((jump, width, radius, step, sigma) for jump in (1.0, 2.0) for width in (1, 2)
                for radius, step in ((2, 1), (4, 2)) for sigma in SIGMAS)


def setting_name(jump: float, width: int, radius: int, step: int, sigma: float) -> str:
    """``j{jump}_b{width}_r{radius}_s{step}_c{sigma}``."""
    return f"j{jump:g}_b{width}_r{radius}_s{step}_c{sigma:g}"


def cascade(rule: np.ndarray, image: np.ndarray, passes: tuple[tuple, ...]) -> np.ndarray:
    """``rule [H, W]`` through the medians of ``passes`` (jump, width, radius, step, sigma)."""
    out = rule
    for jump, width, radius, step, sigma in passes:
        out = edge_weighted_median(out, image, jump=jump, width=width, radius=radius,
                                   step=step, sigma_colour=sigma)
    return out


def main(out: Path, root: str, only: set[str]) -> None:
    model = crossview.load_model("matchstereo-hybrid")
    scenes = SceneFolders(root, task="stereo")
    records, costly = [], []
    for index, name in enumerate(scenes.names()):
        if only and name not in only:
            continue
        sample = scenes[index]
        field = predict_fields(model, sample["image0"], sample["image1"], "stereo",
                               fuse=False).field
        net = field_to_disparity(field[:1])[0].numpy()
        net_right = field_to_disparity(field[1:], "right")[0].numpy()
        search = sgbm_num_disparities(float(max(net.max(), net_right.max())))
        sgbm = sgbm_disparity(sample["image0"], sample["image1"], search)
        rule = fuse_view(net, noc_mask(field, FUSION_CONSISTENCY_PX)[0].numpy(), sgbm)
        truth, valid = sample["disparity"], sample["valid"]
        records.append({"root": root, "scene": name, "setting": "rule", "refine": True,
                        "seconds": 0.0, **scores(rule, truth, valid)})
        singles = [((jump, *window, sigma),) for jump, window, sigma
                   in itertools.product(JUMPS_PX, WINDOWS + COSTLY_WINDOWS, SIGMAS)]
        pairs = [(first, second) for first in FIRSTS for second in SECONDS]
        for passes in singles + pairs:
            start = time.perf_counter()
            filtered = cascade(rule, sample["image0"], passes)
            affordable = all(2 * radius // step + 1 == 5 for _, _, radius, step, _ in passes)
            (records if affordable else costly).append({
                            "root": root, "scene": name, "refine": True,
                            "setting": "+".join(setting_name(*p) for p in passes),
                            "seconds": time.perf_counter() - start,
                            **scores(filtered, truth, valid)})
        print(name, {r["setting"]: round(r["bad2"], 2) for r in records
                     if r["scene"] == name and r["setting"] in ("rule", "j2_b2_r10_s5_c20")},
              flush=True)
        write_json(out, {"weights": "bundled", "records": records, "costly": costly})


if __name__ == "__main__":
    main(Path(sys.argv[1]), sys.argv[2], set(os.environ.get("SCENES", "").split(",")) - {""})
