"""The fused stereo default on real scenes whose right image is darkened to 0.7 (a camera that
exposed less), with SGBM's rank run first (shipped) and with the colour run alone.

Each stereo scene of ROOT runs through ``predict_fields`` with its defaults (the tone matching
included) with ``sgbm_fusion.FUSION_SGBM_RUNS`` as shipped and as ``({},)``; the left view's
bad-2 % is recorded per scene, and the means printed.

Run: ``OMP_NUM_THREADS=1 python docs/results/real-stereo/real_rank_gain.py OUT.json
../shared/real-train``
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np

import crossview
from crossview.geometry.disparity import field_to_disparity
from crossview.models.dense import sgbm_fusion
from crossview.models.dense.inference import predict_fields
from crossview.report import write_json

sys.path.insert(0, str(Path(__file__).parent))
from real_working_size import scenes_with_truth

GAIN = 0.7
RUNS = {"colour": ({},), "rank then colour": sgbm_fusion.FUSION_SGBM_RUNS}


def main(out: Path, root: str) -> None:
    model = crossview.load_model("matchstereo-hybrid")
    table: dict[str, dict[str, float]] = {}
    for name, sample, truth, valid in scenes_with_truth(root):
        right = np.clip(np.rint(GAIN * sample["image1"].astype(np.float64)), 0, 255)
        table[name] = {}
        for label, runs in RUNS.items():
            sgbm_fusion.FUSION_SGBM_RUNS = runs
            field = predict_fields(model, sample["image0"], right.astype(np.uint8),
                                   "stereo").field
            error = np.abs(field_to_disparity(field[:1])[0].numpy() - truth)[valid]
            table[name][label] = float(100 * (error > 2).mean())
        print(name, {k: round(v, 2) for k, v in table[name].items()}, flush=True)
        write_json(out, {"gain": GAIN, "bad2": table})
    print("mean bad-2 %:", {label: round(float(np.mean([row[label] for row in table.values()])), 2)
                            for label in RUNS})


if __name__ == "__main__":
    main(Path(sys.argv[1]), sys.argv[2])
