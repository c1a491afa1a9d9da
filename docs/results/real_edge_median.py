"""The colour-weighted median along depth edges after the SGBM fusion, scored on real scenes.

For every stereo scene under ROOT (``SCENES=a,b,...`` keeps only those), the bundled
``matchstereo-hybrid`` network runs with its defaults but without the fusion (lri and the
refinement on), SGBM runs on the left view with the fusion's search range, and the left view is
fused by the rule of :func:`crossview.models.dense.sgbm_fusion.fuse_view` without the median
(setting ``rule``) and then filtered by
:func:`crossview.geometry.edge_weighted_median.edge_weighted_median` with each setting of the
grid below (``j{jump}_b{width}_r{radius}_s{step}_c{sigma_colour}``). Records in the format of
``real_inference_settings.py``, so that ``real_choice.py`` chooses by leave-one-group-out;
``seconds`` is the median's time for the left view (one thread of numpy). The time target
(a pair in 2 s on two cores, fusion included) leaves room for windows of 5 x 5 samples only
(about 0.05 s a pair of views at 375 x 1242): those settings are the ``records`` that
``real_choice.py`` reads; the windows of 11 x 11 and 9 x 9 samples (0.25-0.7 s) are kept apart
as ``costly`` to show what the budget gives up.

Run: ``OMP_NUM_THREADS=1 python docs/results/real_edge_median.py OUT.json ROOT``
"""

from __future__ import annotations

import itertools
import os
import sys
import time
from pathlib import Path

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
        for jump, (width, radius, step), sigma in itertools.product(
                JUMPS_PX, WINDOWS + COSTLY_WINDOWS, SIGMAS):
            start = time.perf_counter()
            filtered = edge_weighted_median(rule, sample["image0"], jump=jump, width=width,
                                            radius=radius, step=step, sigma_colour=sigma)
            (records if (width, radius, step) in WINDOWS else costly).append({
                            "root": root, "scene": name, "refine": True,
                            "setting": f"j{jump:g}_b{width}_r{radius}_s{step}_c{sigma:g}",
                            "seconds": time.perf_counter() - start,
                            **scores(filtered, truth, valid)})
        print(name, {r["setting"]: round(r["bad2"], 2) for r in records
                     if r["scene"] == name and r["setting"] in ("rule", "j2_b2_r10_s5_c20")},
              flush=True)
        write_json(out, {"weights": "bundled", "records": records, "costly": costly})


if __name__ == "__main__":
    main(Path(sys.argv[1]), sys.argv[2], set(os.environ.get("SCENES", "").split(",")) - {""})
