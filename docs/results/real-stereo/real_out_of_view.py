"""The out-of-view strip continued linearly inside the fusion, scored on real scenes.

For every stereo scene under ROOT the bundled ``matchstereo-hybrid`` network runs
(:func:`real_study.run_study`), SGBM runs on both views as the fusion runs it (padded, left-right
checked within ``FUSION_SGBM_CHECK_PX``), and the left view is fused by the rule
(:func:`crossview.models.dense.sgbm_fusion.fuse_view` without the image), then: ``median``
(the shipped edge medians only), or :func:`crossview.geometry.out_of_view.extend_out_of_view`
with each ``span`` and ``rows`` of the grid below ``before`` or ``after`` the medians
(``k{span}_r{rows}_{order}``). This ran at bc5e679 (SGBM's uniqueness 10 and the network in
all of SGBM's holes then: round five's thresholds came after).

Run: ``OMP_NUM_THREADS=1 python docs/results/real-stereo/real_out_of_view.py OUT.json ROOT``
"""

from __future__ import annotations

import itertools
import sys
from pathlib import Path

import numpy as np

from crossview.geometry.consistency import noc_mask
from crossview.geometry.out_of_view import extend_out_of_view
from crossview.models.dense.classical import (
    left_right_checked,
    sgbm_disparity,
    sgbm_right_disparity,
)
from crossview.models.dense.sgbm_fusion import (
    FUSION_CONSISTENCY_PX,
    FUSION_SGBM_CHECK_PX,
    fuse_view,
)

sys.path.insert(0, str(Path(__file__).parent))
from real_study import NetworkScene, medians, run_study

SPANS = (12, 16, 24)
ROWS = (10, 25, 50, 100)


def settings(scene: NetworkScene) -> dict[str, np.ndarray]:
    """``{median, k{span}_r{rows}_{before,after}: left disparity}`` of one scene."""
    sgbm = left_right_checked(sgbm_disparity(scene.left, scene.right, scene.search, pad=True),
                              sgbm_right_disparity(scene.left, scene.right, scene.search,
                                                   pad=True), FUSION_SGBM_CHECK_PX)
    rule = fuse_view(scene.net, noc_mask(scene.field, FUSION_CONSISTENCY_PX)[0].numpy(), sgbm,
                     network_run=0)
    filtered = medians(rule, scene.left)
    out = {"median": filtered}
    for span, rows in itertools.product(SPANS, ROWS):
        out[f"k{span}_r{rows}_before"] = medians(extend_out_of_view(rule, span, rows), scene.left)
        out[f"k{span}_r{rows}_after"] = extend_out_of_view(filtered, span, rows)
    return out


if __name__ == "__main__":
    run_study(Path(sys.argv[1]), sys.argv[2], settings,
              shown=lambda setting: setting.endswith(("median", "r50_after")))
