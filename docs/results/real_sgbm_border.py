"""SGBM at the image border and SGBM's left-right check inside the fusion, scored on real scenes.

OpenCV's SGBM leaves its first ``numDisparities`` columns holes (on Middlebury at the fusion's
search range, 9-23 % of the width), which the fusion then fills from the network or along the
row. For every stereo scene under ROOT (``SCENES=a,b,...`` keeps only those) the bundled
``matchstereo-hybrid`` network runs with its defaults but without the fusion, SGBM runs on both
views with the fusion's search range, as it is (``pad0``) and on the pair widened on the left
by repeated first columns (``pad1``, :func:`crossview.models.dense.classical.sgbm_disparity`
``pad=True``), its left view is optionally kept only where the two SGBM views agree
(``check{px}``, :func:`~crossview.models.dense.classical.left_right_checked`; ``check-`` none),
and the left view is fused by :func:`crossview.models.dense.sgbm_fusion.fuse_view` with its
image (all four steps, the shipped medians). Records in the format of
``real_inference_settings.py``, so that ``real_choice.py`` chooses by leave-one-group-out;
``seconds`` is the two SGBM runs' time.

Run: ``OMP_NUM_THREADS=1 python docs/results/real_sgbm_border.py OUT.json ROOT``
"""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path

import crossview
from crossview.data.datasets.scenes import SceneFolders
from crossview.geometry.consistency import noc_mask
from crossview.geometry.disparity import field_to_disparity
from crossview.models.dense.classical import (
    left_right_checked,
    sgbm_disparity,
    sgbm_num_disparities,
    sgbm_right_disparity,
)
from crossview.models.dense.inference import predict_fields
from crossview.models.dense.sgbm_fusion import FUSION_CONSISTENCY_PX, fuse_view
from crossview.report import write_json

sys.path.insert(0, str(Path(__file__).parent))
from real_inference_settings import scores  # the scoring of the settings script

CHECKS_PX = (None, 0.5, 1.0, 2.0, 4.0)


def main(out: Path, root: str, only: set[str]) -> None:
    model = crossview.load_model("matchstereo-hybrid")
    scenes = SceneFolders(root, task="stereo")
    records = []
    for index, name in enumerate(scenes.names()):
        if only and name not in only:
            continue
        sample = scenes[index]
        left, right = sample["image0"], sample["image1"]
        field = predict_fields(model, left, right, "stereo", fuse=False).field
        net = field_to_disparity(field[:1])[0].numpy()
        net_right = field_to_disparity(field[1:], "right")[0].numpy()
        consistent = noc_mask(field, FUSION_CONSISTENCY_PX)[0].numpy()
        search = sgbm_num_disparities(float(max(net.max(), net_right.max())))
        for pad in (False, True):
            start = time.perf_counter()
            sgbm = sgbm_disparity(left, right, search, pad=pad)
            sgbm_right = sgbm_right_disparity(left, right, search, pad=pad)
            seconds = time.perf_counter() - start
            for check in CHECKS_PX:
                kept = sgbm if check is None else left_right_checked(sgbm, sgbm_right, check)
                fused = fuse_view(net, consistent, kept, left)
                setting = f"pad{int(pad)}_check{'-' if check is None else f'{check:g}'}"
                records.append({"root": root, "scene": name, "refine": True, "setting": setting,
                                "seconds": seconds,
                                **scores(fused, sample["disparity"], sample["valid"])})
        print(name, {r["setting"]: round(r["bad2"], 2) for r in records if r["scene"] == name},
              flush=True)
        write_json(out, {"weights": "bundled", "records": records})


if __name__ == "__main__":
    main(Path(sys.argv[1]), sys.argv[2], set(os.environ.get("SCENES", "").split(",")) - {""})
