"""The fusion's lengths on larger images: the real-train scenes upsampled twice, with the lengths
and thresholds as chosen (``fixed``), scaled by the factor (``scaled``), or only the lengths
scaled (``lengths``: windows, bands, hole runs, strip spans; the disparity thresholds kept).

Every length and disparity threshold of :mod:`crossview.models.dense.sgbm_fusion` was chosen on
scenes at most 740 px wide; a user's photograph is often larger. For every stereo scene under
ROOT (``SCENES=a,b,...`` keeps only those) the pair is upsampled twice (bicubic), the ground
truth with it (nearest, values doubled), the bundled ``matchstereo-hybrid`` network runs as the
fused default runs it (at 0.75 of the pair, no lri, no refinement), SGBM as the fusion runs it,
and the left view is fused with the shipped settings (``fixed``) and with every length and
threshold doubled (``scaled``: :func:`~crossview.models.dense.sgbm_fusion.fuse_view`'s
``scale=2``, the consistency and SGBM check thresholds doubled). Records in the format of
``real_inference_settings.py``, scored at the upsampled scale with every threshold doubled
(``bad2`` counts errors above 4 px: the same pixels as bad-2 at the original size).

Run: ``OMP_NUM_THREADS=2 python docs/results/real_fusion_scale.py OUT.json ROOT``
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

import numpy as np
from PIL import Image

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
from crossview.models.dense.sgbm_fusion import (
    FUSION_CONSISTENCY_PX,
    FUSION_SGBM_CHECK_PX,
    FUSION_SGBM_UNIQUENESS,
    fuse_view,
)
from crossview.report import write_json

sys.path.insert(0, str(Path(__file__).parent))
from real_inference_settings import scores  # the scoring of the settings script

FACTOR = 2


def upsampled(image: np.ndarray) -> np.ndarray:
    """``[H, W, 3]`` uint8 -> ``[FACTOR H, FACTOR W, 3]``, bicubic."""
    h, w = image.shape[:2]
    return np.asarray(Image.fromarray(image).resize((w * FACTOR, h * FACTOR), Image.BICUBIC))


def nearest(values: np.ndarray) -> np.ndarray:
    """``[H, W]`` -> ``[FACTOR H, FACTOR W]``, each pixel repeated."""
    return np.repeat(np.repeat(values, FACTOR, 0), FACTOR, 1)


def main(out: Path, root: str, only: set[str]) -> None:
    model = crossview.load_model("matchstereo-hybrid")
    scenes = SceneFolders(root, task="stereo")
    records = []
    for index, name in enumerate(scenes.names()):
        if only and name not in only:
            continue
        sample = scenes[index]
        left, right = (upsampled(np.asarray(sample[key])) for key in ("image0", "image1"))
        truth = nearest(np.asarray(sample["disparity"], np.float32)) * FACTOR
        valid = nearest(np.asarray(sample["valid"], bool))
        h, w = left.shape[:2]
        field = predict_fields(model, left, right, "stereo", fuse=False, lri=False, refine=False,
                               size=(round(h * 0.75), round(w * 0.75))).field
        net = field_to_disparity(field[:1])[0].numpy()
        net_right = field_to_disparity(field[1:], "right")[0].numpy()
        search = sgbm_num_disparities(float(max(net.max(), net_right.max())))
        sgbm = sgbm_disparity(left, right, search, pad=True, uniqueness=FUSION_SGBM_UNIQUENESS)
        sgbm_right = sgbm_right_disparity(left, right, search, pad=True,
                                          uniqueness=FUSION_SGBM_UNIQUENESS)
        for setting, scale, thresholds in (("fixed", 1, 1), ("scaled", FACTOR, FACTOR),
                                           ("lengths", FACTOR, 1)):
            fused = fuse_view(
                net, noc_mask(field, FUSION_CONSISTENCY_PX * thresholds)[0].numpy(),
                left_right_checked(sgbm, sgbm_right, FUSION_SGBM_CHECK_PX * thresholds), left,
                scale=scale, jumps=thresholds)
            records.append({"root": root, "scene": name, "refine": False, "setting": setting,
                            "seconds": 0.0, **scores(fused / FACTOR, truth / FACTOR, valid)})
        print(name, {r["setting"]: round(r["bad2"], 2) for r in records if r["scene"] == name},
              flush=True)
        write_json(out, {"weights": "bundled", "factor": FACTOR, "records": records})


if __name__ == "__main__":
    main(Path(sys.argv[1]), sys.argv[2], set(os.environ.get("SCENES", "").split(",")) - {""})
