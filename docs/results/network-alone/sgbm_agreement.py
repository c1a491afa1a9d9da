"""Do SGBM's two runs in the fused default catch each other's errors (network-alone item 26)?

The fused default keeps SGBM's value wherever its left-right check passes; those pixels hold
about 4 of its 9.43 points of dev bad-2 (SGBM's own errors). SGBM runs twice
(:data:`crossview.models.dense.sgbm_fusion.FUSION_SGBM_RUNS`): on the grey images with their
rank transforms, then on the colour images, whose answers only fill the first run's holes. The
two runs match different images, so where both pass their checks and still disagree, one of
them is wrong. Per recorded scene (``record.py``) each run's checked disparity of the left view
is recomputed (:func:`crossview.models.dense.sgbm_fusion.view_inputs` with one run; the two
merged are checked equal to the recording), and:

- ``both``: the share (% of known pixels) where both runs answer, ``disagree T``: where they
  differ by more than ``T`` px (:data:`THRESHOLDS`), ``disagree T wrong``: the points of bad-2
  the default has there;
- bad-2 % of the left view with steps 2-5 as shipped after step 1 is changed where the runs
  disagree by more than ``T``: ``hole T`` (neither run's value: a hole, which the network or
  the row fill answers), ``nearer T`` (the run's value nearer the network's disparity);
  ``shipped`` (replayed, checked equal to the recording).

JSON ``{scene: {setting: value}}``; means per root printed.

Run: ``OMP_NUM_THREADS=1 python docs/results/network-alone/sgbm_agreement.py /tmp/fusion-rec
docs/results/network-alone/sgbm_agreement.json`` (after ``record.py /tmp/fusion-rec
../shared/real-dev ../shared/real-train``).
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np

from crossview.models.dense.sgbm_fusion import FUSION_SGBM_RUNS, fusion_steps, view_inputs

sys.path.insert(0, str(Path(__file__).parent))
from adapt_rate import scores
from record import replay

THRESHOLDS = (1.0, 2.0, 4.0)


def left_runs(d: dict) -> list[np.ndarray]:
    """Each SGBM run's left-right checked disparity ``[H, W]`` of the left view (NaN at its
    holes), as the fusion computes it from the recorded images and network disparities."""
    field = np.stack([np.stack([-d["left_network"], np.zeros_like(d["left_network"])], -1),
                      np.stack([d["right_network"], np.zeros_like(d["right_network"])], -1)])
    consistent = np.stack([d["left_consistent"], d["right_consistent"]])
    return [view_inputs([d["left_image"]], [d["right_image"]], field.astype(np.float32),
                        runs=(run,), consistent=consistent)[0].classical
            for run in FUSION_SGBM_RUNS]


def scene_row(d: dict) -> dict[str, float]:
    """The measures and settings on one recorded scene (module docstring)."""
    truth, network = d["truth"], d["left_network"]
    first, second = left_runs(d)
    merged = np.where(np.isfinite(first), first, second)
    if not np.array_equal(merged, d["left_classical"], equal_nan=True):
        raise RuntimeError("the recomputed runs do not merge into the recorded SGBM disparity")

    def fused(classical: np.ndarray) -> np.ndarray:
        return fusion_steps(network, d["left_consistent"], classical, d["left_image"]).fused

    shipped = fused(merged)
    if not np.array_equal(shipped, d["left_fused"]):
        raise RuntimeError("the replayed fusion is not the recorded default's")
    known = np.isfinite(truth) & (truth > 0)
    both = np.isfinite(first) & np.isfinite(second)
    row = {"both": float(100 * (known & both).sum() / known.sum()),
           "shipped": scores(shipped, truth)[0]}
    for threshold in THRESHOLDS:
        disagree = both & (np.abs(first - second) > threshold)
        wrong = known & disagree & (np.abs(shipped - truth) > 2)
        row[f"disagree {threshold:g}"] = float(100 * (known & disagree).sum() / known.sum())
        row[f"disagree {threshold:g} wrong"] = float(100 * wrong.sum() / known.sum())
        row[f"hole {threshold:g}"] = scores(fused(np.where(disagree, np.nan, merged)), truth)[0]
        nearer = np.where(np.abs(second - network) < np.abs(first - network), second, first)
        row[f"nearer {threshold:g}"] = scores(fused(np.where(disagree, nearer, merged)),
                                              truth)[0]
    return row


if __name__ == "__main__":
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    replay(Path(sys.argv[1]), Path(sys.argv[2]), scene_row)
