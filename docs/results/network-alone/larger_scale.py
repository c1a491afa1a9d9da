"""The network alone run on the pair enlarged (issue 50 item 2, item 18).

The network matches tokens of a fixed number of pixels; a thin structure (Art's sticks,
Pipes' pipes) or a hole through which the background shows spans fewer tokens than the
network can resolve, and its field there takes the foreground's value. Run on the pair
enlarged by a factor ``s`` (``size=``, the fields resized back and divided by ``s``: the
command line's fixed-resolution inference), each token covers ``1/s`` of the pixels it
covered, and a disparity error of ``e`` px at the run's size is ``e / s`` px at the pair's.
Item 16 tried 0.75 (smaller); this tries larger.

Runs: ``id``, ``h`` (as in :mod:`flip_ensemble`) and ``x{s}``, ``x{s}h`` (the same at ``s`` times
the pair) for each ``s`` of ``--scales``. Settings scored, each as it is and self-fused
(:func:`flip_ensemble.setting_records`): ``id`` and ``consistent id+h`` (item 15's, for
reference); per scale ``x{s}`` alone and ``consistent x{s}+x{s}h`` (item 15's two runs at that
scale); per scale ``consistent id+x{s}`` (the pair at two scales) and ``consistent
id+h+x{s}+x{s}h`` (four runs); with ``--all`` also ``consistent all`` (every run of every
scale). Records as :mod:`flip_ensemble` writes them, for
``real_choice.py``.

Run: ``OMP_NUM_THREADS=2 python docs/results/network-alone/larger_scale.py OUT.json
../shared/real-train ../shared/real-dev [--scales 1.25 1.5 2]`` then ``python
docs/results/real-stereo/real_choice.py OUT.json ../shared/real-train``; ``--adapt N`` adapts
the network to each pair first (:func:`flip_ensemble.adapted`, as ``--self-fuse --adapt N``).
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np

from crossview.data.io import read_image

sys.path.insert(0, str(Path(__file__).parent))
from flip_ensemble import (
    Views,
    adapted,
    most_consistent,
    network_views,
    run_study,
    setting_records,
    study_parser,
)


def combinations(scales: list[float], every_run: bool = False) -> dict[str, list[str]]:
    """``{setting: runs}`` of the module docstring (``every_run``: with ``consistent all``)."""
    settings = {"id": ["id"], "consistent id+h": ["id", "h"]}
    for s in scales:
        settings |= {f"x{s:g}": [f"x{s:g}"],
                     f"consistent x{s:g}+x{s:g}h": [f"x{s:g}", f"x{s:g}h"],
                     f"consistent id+x{s:g}": ["id", f"x{s:g}"],
                     f"consistent id+h+x{s:g}+x{s:g}h": ["id", "h", f"x{s:g}", f"x{s:g}h"]}
    every = ["id", "h", *(f"x{s:g}{h}" for s in scales for h in ("", "h"))]
    return settings | ({"consistent all": every} if every_run else {})


def scene_records(model: object, root: Path, scene: Path, scales: list[float],
                  adapt: int, every_run: bool) -> list[dict]:
    """Every setting's scores on ``scene``, as it is and self-fused, by ``model`` adapted to
    the pair for ``adapt`` steps first (0: none)."""
    left, right = read_image(scene / "left.png"), read_image(scene / "right.png")
    truth = np.load(scene / "gt.npy").astype(np.float32)
    model = adapted(model, left, right, adapt)
    runs: dict[str, Views] = {"id": network_views(model, left, right, False, False),
                              "h": network_views(model, left, right, True, False)}
    for s in scales:
        size = (round(left.shape[0] * s), round(left.shape[1] * s))
        runs[f"x{s:g}"] = network_views(model, left, right, False, False, size=size)
        runs[f"x{s:g}h"] = network_views(model, left, right, True, False, size=size)
    settings = {name: most_consistent(runs, names)
                for name, names in combinations(scales, every_run).items()}
    return setting_records(settings, root, scene, left, right, truth)


if __name__ == "__main__":
    parser = study_parser(__doc__)
    parser.add_argument("--scales", type=float, nargs="+", default=[1.25, 1.5, 2.0],
                        help="factors the pair is enlarged by")
    parser.add_argument("--adapt", type=int, default=0, help="test-time adaptation steps")
    parser.add_argument("--all", action="store_true", help="also every run of every scale")
    args = parser.parse_args()
    run_study(args.out, args.roots,
              lambda model, root, scene: scene_records(model, root, scene, args.scales,
                                                       args.adapt, args.all),
              {"scales": args.scales, "adapt": args.adapt, "all": args.all})
