"""Stereo pairs whose rows are offset: whether, and from which offset on, the fused stereo
default lines the right image up first, chosen by leave-one-group-out on real-train scenes.

The real scenes at hand are rectified (their measured offsets are below 0.3 px), so each scene
of ROOT is also run with its right image moved down by :data:`SHIFTS` px (bilinear; the left
image and its ground truth unchanged), as a rig or a rectification slightly off would leave
it. ``matchstereo-hybrid`` runs with its defaults, with ``fused_network.align_px`` unset (never
lined up) and 0 (always: the right image moved by the measured offset,
:func:`crossview.models.dense.vertical_alignment.measure_rows`); a threshold ``t`` takes the
lined-up run where the measured offset is at least ``t`` px. Scores: bad-2 and EPE of the left
disparity at the known pixels, per scene, shift and threshold, and the measured offset.
Leave-one-group-out (the groups of ROOT's README, a scene's shifted copies in its group) picks
the threshold by the mean bad-2 over all shifts and prints the left-out means per shift.

Run: ``OMP_NUM_THREADS=2 python docs/results/real-stereo/real_vertical_offset.py OUT.json
../shared/real-train``
"""

from __future__ import annotations

import dataclasses
import sys
from pathlib import Path

import numpy as np

import crossview
from crossview.geometry.disparity import field_to_disparity
from crossview.models.dense.inference import predict_fields
from crossview.models.dense.vertical_alignment import measure_rows, rows_shifted
from crossview.report import write_json

sys.path.insert(0, str(Path(__file__).parent))
from real_working_size import (  # the scenes, leave-one-group-out over settings
    print_cap_choice,
    scenes_with_truth,
)

SHIFTS = (0.0, 0.5, 1.0, 2.0, 4.0)
THRESHOLDS = (0.0, 0.25, 0.5, 1.0)


def shifted(image: np.ndarray, by: float) -> np.ndarray:
    """``[H, W, 3]`` uint8 with its content moved ``by`` px down (bilinear), uint8."""
    x = image.transpose(2, 0, 1)[None].astype(np.float32)
    x = rows_shifted(x, np.array([-by], np.float32))
    return x.clip(0, 255).round()[0].transpose(1, 2, 0).astype(np.uint8)


def main(out: Path, root: str) -> None:
    model = crossview.load_model("matchstereo-hybrid")
    preset = model.fused_network
    table: dict[str, dict] = {}
    for name, sample, truth, valid in scenes_with_truth(root):
        left = sample["image0"]
        for shift in SHIFTS:
            right = shifted(sample["image1"], shift)
            runs = {}
            for align in (None, 0.0):
                model.fused_network = dataclasses.replace(preset, align_px=align)
                field = predict_fields(model, left, right, "stereo").field
                error = np.abs(field_to_disparity(field[:1])[0].numpy() - truth)[valid]
                runs[align] = {"bad2": float(100 * (error > 2).mean()),
                               "epe": float(error.mean())}
            measured = measure_rows(left, right).offset
            row = {"never": runs[None]}
            row.update({f"{t:g}": runs[0.0] if abs(measured) >= t else runs[None]
                        for t in THRESHOLDS})
            table[f"{name}@{shift:g}px"] = {"scene": name, "factor": shift,
                                            "measured": measured, **row}
            print(name, shift, round(measured, 3), {k: round(v["bad2"], 2)
                                                     for k, v in row.items()}, flush=True)
            write_json(out, table)
    model.fused_network = preset
    print_cap_choice(table, root, ["never", *(f"{t:g}" for t in THRESHOLDS)], ("bad2", "epe"),
                     label="shift ")


if __name__ == "__main__":
    main(Path(sys.argv[1]), sys.argv[2])
