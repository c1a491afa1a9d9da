"""The fusion's thresholds re-chosen after SGBM's padding, left-right check and the
out-of-view strip: SGBM's uniqueness ratio, the network's consistency threshold, and the
shortest run of SGBM holes along a row in which the network's pixels count (shorter runs are
left to the row fill).

For every stereo scene under ROOT the bundled ``matchstereo-hybrid`` network runs
(:func:`real_study.run_study`); SGBM runs on both views as the fusion runs it (padded,
left-right checked within ``FUSION_SGBM_CHECK_PX``) with each ``uniquenessRatio`` of the grid;
the left view is fused by :func:`crossview.models.dense.sgbm_fusion.fuse_view` with its image
(all five steps) with the network's pixels kept in SGBM's holes where its two views agree
within each consistency threshold of the grid and the hole's run along the row is longer than
each length of the grid (``u{ratio}_c{px}_L{length}``, ``fuse_view``'s ``network_run``;
``u{ratio}_c0``: none of them).

Run: ``OMP_NUM_THREADS=1 python docs/results/real-stereo/real_fusion_thresholds.py OUT.json ROOT``
"""

from __future__ import annotations

import itertools
import sys
from pathlib import Path

import numpy as np

from crossview.geometry.consistency import noc_mask
from crossview.models.dense.classical import (
    left_right_checked,
    sgbm_disparity,
    sgbm_right_disparity,
)
from crossview.models.dense.sgbm_fusion import FUSION_SGBM_CHECK_PX, fuse_view

sys.path.insert(0, str(Path(__file__).parent))
from real_study import NetworkScene, run_study

UNIQUENESS = (3, 5, 10)
CONSISTENCY_PX = (0.25, 0.5)
RUN_LENGTHS = (0, 16, 32, 64, 128)


def settings(scene: NetworkScene) -> dict[str, np.ndarray]:
    """``{u{ratio}_c0, u{ratio}_c{px}_L{length}: left disparity}`` of one scene."""
    out = {}
    for uniqueness in UNIQUENESS:
        sgbm = left_right_checked(
            sgbm_disparity(scene.left, scene.right, scene.search, pad=True,
                           uniqueness=uniqueness),
            sgbm_right_disparity(scene.left, scene.right, scene.search, pad=True,
                                 uniqueness=uniqueness),
            FUSION_SGBM_CHECK_PX)
        out[f"u{uniqueness}_c0"] = fuse_view(scene.net, np.zeros(scene.net.shape, bool), sgbm,
                                             scene.left)
        for threshold, length in itertools.product(CONSISTENCY_PX, RUN_LENGTHS):
            consistent = noc_mask(scene.field, threshold)[0].numpy()
            out[f"u{uniqueness}_c{threshold:g}_L{length}"] = fuse_view(
                scene.net, consistent, sgbm, scene.left, network_run=length)
    return out


if __name__ == "__main__":
    run_study(Path(sys.argv[1]), sys.argv[2], settings)
