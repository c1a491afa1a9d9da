"""The self-fused network in the fused default's holes (issue 50 items 2 and 3, item 21): now
that the network's own answer (``--self-fuse``: four runs, each pixel from the best matched,
item 20) beats SGBM filled, can it answer more of SGBM's holes than the row fill does?

:mod:`adapted_holes`'s replay of the fusion (the same SGBM runs, medians and strip; the
default's own field replayed and checked bit for bit) given ``self-fused``: the both views'
disparities of ``crossview.estimate_disparity(..., self_fuse=True)`` as a field, whose pixels
answer SGBM's holes longer than ``RUN`` px (0, 16, 32, 64, 128) where its views agree within
``CHECK`` px (0.5, 1; ``inf``: everywhere, the self-fused answer in every such hole).

Run: ``OMP_NUM_THREADS=1 python docs/results/network-alone/self_fused_holes.py OUT.json ROOT``
then ``python docs/results/real-stereo/real_choice.py OUT.json ../shared/real-train``
"""

from __future__ import annotations

import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).parent))
from adapted_holes import main

from crossview.models.dense.inference import predict_fields


def self_fused_field(model: torch.nn.Module, sample: dict) -> dict[str, torch.Tensor]:
    """``{"self-fused": both views' self-fused field [2, H, W, 2]}`` on ``sample``'s pair."""
    with torch.no_grad():
        return {"self-fused": predict_fields(model, sample["image0"], sample["image1"],
                                             "stereo", self_fuse=True).field}


if __name__ == "__main__":
    main(__doc__, self_fused_field, (0.5, 1.0, float("inf")))
