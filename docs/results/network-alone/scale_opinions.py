"""More opinions for the self-fusion's choice: the network at other scales (issue 50 item 2,
item 16).

Item 15 ships two runs, the pair and its left-right mirrored swapped copy, each pixel from the
run whose two views agree better. Are other runs, whose errors fall elsewhere, worth adding to
that choice? The network run at 0.75 of the pair (``size=``, fields resized back) sees more
context per token and costs about half a run; its mirrored copy likewise. Runs: ``id``, ``h``
(as in :mod:`flip_ensemble`), ``s75`` and ``s75h`` (the same at 0.75 of the pair). Scored, each
as it is and self-fused (:func:`flip_ensemble.setting_records`): ``s75`` alone, and per pixel the
most consistent of ``id+h`` (item 15's), ``id+s75``, ``id+h+s75`` and ``id+h+s75+s75h``.
Records as :mod:`flip_ensemble` writes them, for ``real_choice.py``.

Run: ``OMP_NUM_THREADS=2 python docs/results/network-alone/scale_opinions.py OUT.json
../shared/real-train ../shared/real-dev`` then ``python docs/results/real-stereo/real_choice.py
OUT.json ../shared/real-train``
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np

from crossview.data.io import read_image

sys.path.insert(0, str(Path(__file__).parent))
from flip_ensemble import (
    Views,
    most_consistent,
    network_views,
    run_study,
    setting_records,
    study_parser,
)

SCALE = 0.75
COMBINATIONS = {"consistent id+h": ["id", "h"], "consistent id+s75": ["id", "s75"],
                "consistent id+h+s75": ["id", "h", "s75"],
                "consistent id+h+s75+s75h": ["id", "h", "s75", "s75h"]}


def scene_records(model: object, root: Path, scene: Path) -> list[dict]:
    """Every setting's scores on ``scene``, as it is and self-fused."""
    left, right = read_image(scene / "left.png"), read_image(scene / "right.png")
    truth = np.load(scene / "gt.npy").astype(np.float32)
    small = (round(left.shape[0] * SCALE), round(left.shape[1] * SCALE))
    runs: dict[str, Views] = {
        "id": network_views(model, left, right, False, False),
        "h": network_views(model, left, right, True, False),
        "s75": network_views(model, left, right, False, False, size=small),
        "s75h": network_views(model, left, right, True, False, size=small)}
    settings = {"s75": runs["s75"]} | {name: most_consistent(runs, names)
                                       for name, names in COMBINATIONS.items()}
    return setting_records(settings, root, scene, left, right, truth)


if __name__ == "__main__":
    args = study_parser(__doc__).parse_args()
    run_study(args.out, args.roots, scene_records, {"scale": SCALE})
