"""SGBM at the image border and SGBM's left-right check inside the fusion, scored on real scenes.

OpenCV's SGBM leaves its first ``numDisparities`` columns holes (on Middlebury at the fusion's
search range, 9-23 % of the width), which the fusion then fills from the network or along the
row. For every stereo scene under ROOT the bundled ``matchstereo-hybrid`` network runs
(:func:`real_study.run_study`), SGBM runs on both views with the fusion's search range, as it
is (``pad0``) and on the pair widened on the left by repeated first columns (``pad1``,
:func:`crossview.models.dense.classical.sgbm_disparity` ``pad=True``), its left view is
optionally kept only where the two SGBM views agree (``check{px}``,
:func:`~crossview.models.dense.classical.left_right_checked`; ``check-`` none), and the left
view is fused as the fusion of its day did (it ran at c6235fc): the rule of
:func:`crossview.models.dense.sgbm_fusion.fuse_view` with the network in all of SGBM's holes,
then the shipped edge medians (round five's out-of-view strip and thresholds came after). The
JSON's ``seconds`` are that run's two SGBM calls.

Run: ``OMP_NUM_THREADS=1 python docs/results/real-stereo/real_sgbm_border.py OUT.json ROOT``
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np

from crossview.geometry.consistency import noc_mask
from crossview.models.dense.classical import (
    left_right_checked,
    sgbm_disparity,
    sgbm_right_disparity,
)
from crossview.models.dense.sgbm_fusion import FUSION_CONSISTENCY_PX, fuse_view

sys.path.insert(0, str(Path(__file__).parent))
from real_study import NetworkScene, medians, run_study

CHECKS_PX = (None, 0.5, 1.0, 2.0, 4.0)


def settings(scene: NetworkScene) -> dict[str, np.ndarray]:
    """``{pad{0,1}_check{-,px}: left disparity}`` of one scene."""
    consistent = noc_mask(scene.field, FUSION_CONSISTENCY_PX)[0].numpy()
    out = {}
    for pad in (False, True):
        sgbm = sgbm_disparity(scene.left, scene.right, scene.search, pad=pad)
        sgbm_right = sgbm_right_disparity(scene.left, scene.right, scene.search, pad=pad)
        for check in CHECKS_PX:
            kept = sgbm if check is None else left_right_checked(sgbm, sgbm_right, check)
            name = f"pad{int(pad)}_check{'-' if check is None else f'{check:g}'}"
            out[name] = medians(fuse_view(scene.net, consistent, kept, network_run=0),
                                scene.left)
    return out


if __name__ == "__main__":
    run_study(Path(sys.argv[1]), sys.argv[2], settings)
