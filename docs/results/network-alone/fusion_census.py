"""Does the census matching cost choose better than the stereo fusion's steps between SGBM's,
the network's and the fill's values (network-alone item 22)? Left view, from the fusion's
recorded inputs (``record.py``); the flow fusion gained from such a choice
(docs/results/real-flow/flow_census_choice.py).

For each scene the recorded default is replayed
(:func:`crossview.models.dense.sgbm_fusion.fusion_steps`, checked equal to the recording)
and, for census windows K in :data:`WINDOWS`, the network's value replaces another where its
census cost
(:func:`crossview.geometry.census_arrays.census_cost`, the right view's network disparity for
the second row, which the left view's cost does not read) is lower:

- ``r1 K``: where SGBM answered (step 1) and the network's views agree (its consistency mask);
- ``r1any K``: where SGBM answered;
- ``r2 K``: where the fill answered (step 3), against the filled value's cost;
- ``r2cons K``: the same where the network's views agree;
- ``r1+r2 K``: ``r1`` and ``r2`` together;

then steps 3-5 run as the fusion runs them (the replaced pixels count as SGBM's). Bad-2 % of
the left view on the known pixels (``adapt_rate.scores``) and the share of pixels replaced
(``... share``, %). JSON ``{scene: {setting: value}}``; means per root printed.

Run: ``OMP_NUM_THREADS=1 python docs/results/network-alone/fusion_census.py /tmp/fusion-rec
docs/results/network-alone/fusion_census.json`` (after ``record.py /tmp/fusion-rec
../shared/real-dev ../shared/real-train``).
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np

from crossview.geometry.census_arrays import census_codes, census_cost
from crossview.models.dense.sgbm_fusion import FILL, SGBM, fusion_steps

sys.path.insert(0, str(Path(__file__).parent))
from adapt_rate import scores
from record import replay

WINDOWS = (5, 9, 15)


def left_cost(codes: list[np.ndarray], left: np.ndarray, right: np.ndarray,
              window: int) -> np.ndarray:
    """The left view's census cost ``[H, W]`` of the disparity ``left [H, W]`` (NaN: 0)."""
    field = np.zeros((2, *left.shape, 2), np.float32)
    field[0, ..., 0] = -np.nan_to_num(left)
    field[1, ..., 0] = np.nan_to_num(right)
    return census_cost(codes, field, window)[0]


def scene_row(d: dict) -> dict[str, float]:
    """The settings' scores on one recorded scene (module docstring)."""
    image, network, consistent = d["left_image"], d["left_network"], d["left_consistent"]
    classical, truth = d["left_classical"], d["truth"]
    codes = [census_codes(image), census_codes(d["right_image"])]
    base = fusion_steps(network, consistent, classical, image, "left")
    if not np.array_equal(base.fused, d["left_fused"]):
        raise RuntimeError("the replayed fusion is not the recorded default's")
    row = {"default": scores(base.fused, truth)[0]}
    for window in WINDOWS:
        cost_network, cost_sgbm, cost_fill = (
            left_cost(codes, values, d["right_network"], window)
            for values in (network, classical, base.filled))
        lower_sgbm = (base.sources == SGBM) & (cost_network < cost_sgbm)
        lower_fill = (base.sources == FILL) & (cost_network < cost_fill)
        for name, take in (("r1", lower_sgbm & consistent), ("r1any", lower_sgbm),
                           ("r2", lower_fill), ("r2cons", lower_fill & consistent),
                           ("r1+r2", (lower_sgbm & consistent) | lower_fill)):
            replaced = np.where(take, network, classical)
            row[f"{name} {window}"] = scores(
                fusion_steps(network, consistent, replaced, image, "left").fused, truth)[0]
            row[f"{name} {window} share"] = float(100 * take.mean())
    return row


if __name__ == "__main__":
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    replay(Path(sys.argv[1]), Path(sys.argv[2]), scene_row)
