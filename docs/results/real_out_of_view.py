"""The out-of-view strip continued linearly inside the fusion, scored on real scenes.

For every stereo scene under ROOT (``SCENES=a,b,...`` keeps only those) the bundled
``matchstereo-hybrid`` network runs with its defaults but without the fusion, SGBM runs on both
views as the fusion runs it (padded, left-right checked within ``FUSION_SGBM_CHECK_PX``), and
the left view is fused by the rule (:func:`crossview.models.dense.sgbm_fusion.fuse_view`
without the image), then: ``median`` (the shipped edge medians only), or
:func:`crossview.geometry.out_of_view.extend_out_of_view` with each ``span`` and ``rows`` of
the grid below ``before`` or ``after`` the medians (``k{span}_r{rows}_{order}``). Records in
the format of ``real_inference_settings.py``, so that ``real_choice.py`` chooses by
leave-one-group-out.

Run: ``OMP_NUM_THREADS=1 python docs/results/real_out_of_view.py OUT.json ROOT``
"""

from __future__ import annotations

import itertools
import os
import sys
from pathlib import Path

import crossview
from crossview.data.datasets.scenes import SceneFolders
from crossview.geometry.consistency import noc_mask
from crossview.geometry.disparity import field_to_disparity
from crossview.geometry.edge_weighted_median import edge_weighted_median
from crossview.geometry.out_of_view import extend_out_of_view
from crossview.models.dense.classical import (
    left_right_checked,
    sgbm_disparity,
    sgbm_num_disparities,
    sgbm_right_disparity,
)
from crossview.models.dense.inference import predict_fields
from crossview.models.dense.sgbm_fusion import (
    EDGE_MEDIANS,
    FUSION_CONSISTENCY_PX,
    FUSION_SGBM_CHECK_PX,
    fuse_view,
)
from crossview.report import write_json

sys.path.insert(0, str(Path(__file__).parent))
from real_inference_settings import scores  # the scoring of the settings script

SPANS = (12, 16, 24)
ROWS = (10, 25, 50, 100)


def medians(disparity, image):
    """The shipped edge medians, in order."""
    for settings in EDGE_MEDIANS:
        disparity = edge_weighted_median(disparity, image, **settings)
    return disparity


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
        sgbm = left_right_checked(sgbm_disparity(left, right, search, pad=True),
                                  sgbm_right_disparity(left, right, search, pad=True),
                                  FUSION_SGBM_CHECK_PX)
        rule = fuse_view(net, noc_mask(field, FUSION_CONSISTENCY_PX)[0].numpy(), sgbm)
        filtered = medians(rule, left)
        results = {"median": filtered}
        for span, rows in itertools.product(SPANS, ROWS):
            results[f"k{span}_r{rows}_before"] = medians(extend_out_of_view(rule, span, rows),
                                                         left)
            results[f"k{span}_r{rows}_after"] = extend_out_of_view(filtered, span, rows)
        for setting, disparity in results.items():
            records.append({"root": root, "scene": name, "refine": True, "setting": setting,
                            "seconds": 0.0,
                            **scores(disparity, sample["disparity"], sample["valid"])})
        print(name, {r["setting"]: round(r["bad2"], 2) for r in records
                     if r["scene"] == name and r["setting"].endswith(("median", "r50_after"))},
              flush=True)
        write_json(out, {"weights": "bundled", "records": records})


if __name__ == "__main__":
    main(Path(sys.argv[1]), sys.argv[2], set(os.environ.get("SCENES", "").split(",")) - {""})
