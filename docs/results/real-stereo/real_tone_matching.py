"""Stereo pairs whose cameras expose differently: whether, and from which difference on, the
fused stereo default tones the right image to the left before SGBM, chosen by
leave-one-group-out on real-train scenes.

Each scene of ROOT runs as it is and with its right image changed by :data:`CHANGES` (a gain,
a gamma, a colour cast; the left image and the ground truth unchanged), as two cameras with
their own exposure would leave it (PianoL, whose right image was taken under other lighting, is
among the scenes as it is). ``matchstereo-hybrid`` runs with its defaults, with
``sgbm_fusion.TONE_MATCH_MIN_GREY`` unset (never toned) and 0 (always: SGBM sees the right image
mapped through the tone curves fitted on the network's consistent matches,
:mod:`crossview.models.dense.tone_matching`); a threshold ``t`` takes the toned run where the
curves differ from the identity by at least ``t`` grey levels (recorded in the toned run).
Scores: bad-2 and EPE of the left disparity at the known pixels. Leave-one-group-out (the groups
of ROOT's README, a scene's changed copies in its group) picks the threshold by the mean bad-2
over all changes and prints the left-out means per change.

Run: ``OMP_NUM_THREADS=2 python docs/results/real-stereo/real_tone_matching.py OUT.json
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
from crossview.models.dense.tone_matching import (
    SAMPLE_STRIDE,
    matched_samples,
    right_toned_to_left,
    tone_curves,
    tone_difference,
)
from crossview.report import write_json

sys.path.insert(0, str(Path(__file__).parent))
from real_working_size import (  # the scenes, leave-one-group-out over settings
    print_cap_choice,
    scenes_with_truth,
)

# name -> the right image's change, on 0..255 floats
CHANGES = {
    "none": lambda x: x,
    "gain0.7": lambda x: 0.7 * x,
    "gain1.3": lambda x: 1.3 * x,
    "gamma0.6": lambda x: 255 * (x / 255) ** 0.6,
    "gamma1.6": lambda x: 255 * (x / 255) ** 1.6,
    "cast": lambda x: x * np.array([1.15, 1.0, 0.8]),
}
THRESHOLDS = (0.0, 2.0, 4.0, 8.0)


def main(out: Path, root: str) -> None:
    model = crossview.load_model("matchstereo-hybrid")
    measured: list[float] = []

    def recording(left: np.ndarray, right: np.ndarray, disparity: np.ndarray,
                  trusted: np.ndarray, min_difference: float | None) -> np.ndarray:
        reference, source = matched_samples(left, right, disparity, trusted, SAMPLE_STRIDE)
        measured.append(tone_difference(tone_curves(source, reference), source))
        return right_toned_to_left(left, right, disparity, trusted, min_difference)

    sgbm_fusion.right_toned_to_left = recording
    table: dict[str, dict] = {}
    for name, sample, truth, valid in scenes_with_truth(root):
        for index, (change, apply) in enumerate(CHANGES.items()):
            right = np.clip(np.rint(apply(sample["image1"].astype(np.float64))), 0, 255)
            runs = {}
            for toned in (None, 0.0):
                sgbm_fusion.TONE_MATCH_MIN_GREY = toned
                field = predict_fields(model, sample["image0"], right.astype(np.uint8),
                                       "stereo").field
                error = np.abs(field_to_disparity(field[:1])[0].numpy() - truth)[valid]
                runs[toned] = {"bad2": float(100 * (error > 2).mean()),
                               "epe": float(error.mean())}
            difference = measured[-1]
            row = {"never": runs[None]}
            row.update({f"{t:g}": runs[0.0] if difference >= t else runs[None]
                        for t in THRESHOLDS})
            table[f"{name}@{change}"] = {"scene": name, "factor": index, "change": change,
                                         "difference": difference, **row}
            print(name, change, round(difference, 2), {k: round(v["bad2"], 2)
                                                        for k, v in row.items()}, flush=True)
            write_json(out, table)
    print("changes:", dict(enumerate(CHANGES)))
    print_cap_choice(table, root, ["never", *(f"{t:g}" for t in THRESHOLDS)], ("bad2", "epe"),
                     label="change ")


if __name__ == "__main__":
    main(Path(sys.argv[1]), sys.argv[2])
