"""The self-fusion's consistency check with the mirrored second run (item 17): the 1 px check
(:data:`crossview.models.dense.self_fusion.SELF_FUSION_CHECK_PX`) was chosen for one run (item
10); with item 15's more consistent of two runs more pixels agree, so is another check better?

For every scene the two runs of item 15 (``id``, ``h``: :func:`flip_ensemble.network_views`),
the more consistent per pixel (:func:`flip_ensemble.most_consistent`), then self-fused with the
check at each of :data:`CHECKS` px (the module constant set for the call). Records as
:mod:`flip_ensemble` writes them (setting ``check T``), for ``real_choice.py``.

Run: ``OMP_NUM_THREADS=2 python docs/results/network-alone/mirror_check.py OUT.json
../shared/real-train ../shared/real-dev`` then ``python docs/results/real-stereo/real_choice.py
OUT.json ../shared/real-train``; ``--adapt N`` adapts the network to each pair first (as
``--self-fuse --adapt N``, whose self-fusion runs these two runs).
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np

from crossview.data.io import read_image
from crossview.models.dense import self_fusion

sys.path.insert(0, str(Path(__file__).parent))
from adapt_rate import scores
from flip_ensemble import (
    adapted,
    left_right_error,
    most_consistent,
    network_views,
    run_study,
    study_parser,
)

CHECKS = (0.5, 0.75, 1.0, 1.5, 2.0)  # px


def scene_records(model: object, root: Path, scene: Path, adapt: int = 0) -> list[dict]:
    """The left view's scores on ``scene`` at every check, by ``model`` adapted to the pair
    for ``adapt`` steps first (0: none; :func:`flip_ensemble.adapted`)."""
    left, right = read_image(scene / "left.png"), read_image(scene / "right.png")
    truth = np.load(scene / "gt.npy").astype(np.float32)
    model = adapted(model, left, right, adapt)
    runs = {"id": network_views(model, left, right, False, False),
            "h": network_views(model, left, right, True, False)}
    views = most_consistent(runs, ["id", "h"])
    disparity, error = np.stack(views).astype(np.float32), left_right_error(views)
    records = []
    for check in CHECKS:
        self_fusion.SELF_FUSION_CHECK_PX = check
        fused = self_fusion.self_fused_disparities([left, right], disparity, error)[0]
        bad, epe = scores(fused, truth)
        records.append({"root": str(root), "scene": scene.name, "setting": f"check {check:g}",
                        "refine": True, "bad2": bad, "epe": epe})
    return records


if __name__ == "__main__":
    parser = study_parser(__doc__)
    parser.add_argument("--adapt", type=int, default=0, help="test-time adaptation steps")
    args = parser.parse_args()
    run_study(args.out, args.roots,
              lambda model, root, scene: scene_records(model, root, scene, args.adapt),
              {"checks": CHECKS, "adapt": args.adapt})
