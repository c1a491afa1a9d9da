"""The fusion's thresholds re-chosen after SGBM's padding, left-right check and the
out-of-view strip: SGBM's uniqueness ratio, the network's consistency threshold, and the
shortest run of SGBM holes along a row in which the network's pixels count (shorter runs are
left to the row fill).

For every stereo scene under ROOT (``SCENES=a,b,...`` keeps only those) the bundled
``matchstereo-hybrid`` network runs with its defaults but without the fusion; SGBM runs on
both views as the fusion runs it (padded, left-right checked within ``FUSION_SGBM_CHECK_PX``)
with each ``uniquenessRatio`` of the grid; the left view is fused by
:func:`crossview.models.dense.sgbm_fusion.fuse_view` with its image (all five steps) with the
network's pixels kept in SGBM's holes where its two views agree within each consistency
threshold of the grid and the hole's run along the row is longer than each length of the grid
(``u{ratio}_c{px}_L{length}``, ``fuse_view``'s ``network_run``; ``u{ratio}_c0``: none of
them). Records in the format of
``real_inference_settings.py``, so that ``real_choice.py`` chooses by leave-one-group-out.

Run: ``OMP_NUM_THREADS=1 python docs/results/real_fusion_thresholds.py OUT.json ROOT``
"""

from __future__ import annotations

import itertools
import os
import sys
from pathlib import Path

import numpy as np

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
from crossview.models.dense.sgbm_fusion import FUSION_SGBM_CHECK_PX, fuse_view
from crossview.report import write_json

sys.path.insert(0, str(Path(__file__).parent))
from real_inference_settings import scores  # the scoring of the settings script

UNIQUENESS = (3, 5, 10)
CONSISTENCY_PX = (0.25, 0.5)
RUN_LENGTHS = (0, 16, 32, 64, 128)


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
        search = sgbm_num_disparities(float(max(net.max(), net_right.max())))
        for uniqueness in UNIQUENESS:
            sgbm = left_right_checked(
                sgbm_disparity(left, right, search, pad=True, uniqueness=uniqueness),
                sgbm_right_disparity(left, right, search, pad=True, uniqueness=uniqueness),
                FUSION_SGBM_CHECK_PX)
            fused = {f"u{uniqueness}_c0": fuse_view(net, np.zeros(net.shape, bool), sgbm, left)}
            for threshold, length in itertools.product(CONSISTENCY_PX, RUN_LENGTHS):
                consistent = noc_mask(field, threshold)[0].numpy()
                fused[f"u{uniqueness}_c{threshold:g}_L{length}"] = fuse_view(
                    net, consistent, sgbm, left, network_run=length)
            for setting, disparity in fused.items():
                records.append({"root": root, "scene": name, "refine": True, "setting": setting,
                                "seconds": 0.0,
                                **scores(disparity, sample["disparity"], sample["valid"])})
        print(name, {r["setting"]: round(r["bad2"], 2) for r in records if r["scene"] == name},
              flush=True)
        write_json(out, {"weights": "bundled", "records": records})


if __name__ == "__main__":
    main(Path(sys.argv[1]), sys.argv[2], set(os.environ.get("SCENES", "").split(",")) - {""})
