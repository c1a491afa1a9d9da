"""Which run the self-fusion should believe: the images' own evidence (issue 50 item 2, item 20).

Item 18's self-fusion takes per pixel and view the one of its four runs (the pair and its
mirrored swapped copy at 1 and 1.5 times the pair's size) whose two views agree best there.
Agreement is blind to a run that is wrong in both views the same way (the thin structures and
holes of art and pipes, where the coarse tokens take the foreground's value in both views).
Two questions with the runs fixed (item 19's cache):

- how much could any per-pixel choice among the runs give (``oracle``: per pixel the run
  nearest the ground truth, left view, not fused; an upper bound, not a method), against the
  choice by agreement as it is (``consistent``, not fused);
- does the images' own evidence choose better: each run's census matching cost
  (:func:`crossview.geometry.census_arrays.census_cost`: 5x5 census of the grey images, the
  Hamming distance between a pixel's code and its match's in the other image, weighted
  between the two pixels around the match, averaged over a K x K window), used alone
  (``census K``) or among the runs that agree within 0.5 px (``agree then census K``; where
  none agrees, the least left-right error as now). Every value stays one of the network's runs;
  the cost only picks among them. Each setting is self-fused with the check at 0.5 px (item
  19's choice) and at 1 px (shipped); the settings ``6 runs ...`` add the runs at 1.25 (item
  19's six).

With ``--adapt N`` the network is adapted to each pair first, as ``--self-fuse --adapt N``
adapts it, and the settings are scored over its four runs and its six (``6 runs ...``). (The
first adapted run, ``run_evidence_holdout_adapt10.json``, scored its two runs at the pair's
size, ``2 runs ...``, and its four: commit 875bec5.)

Records as :mod:`flip_ensemble` writes them, for ``real_choice.py``.

Run: ``OMP_NUM_THREADS=1 python docs/results/network-alone/run_evidence.py OUT.json
../shared/real-train ../shared/real-dev --cache /tmp/run-cache`` (``--adapt 10``: the
held-out five, ``/tmp/holdout``) then ``python
docs/results/real-stereo/real_choice.py OUT.json ../shared/real-train``
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np

from crossview.data.io import read_image
from crossview.geometry.census_arrays import census_codes, census_cost

sys.path.insert(0, str(Path(__file__).parent))
from adapt_rate import scores
from flip_ensemble import (
    Views,
    adapted,
    as_field,
    left_right_error,
    run_study,
    study_parser,
)
from run_choice import FOUR, SIX, fused, network_runs, scene_runs

WINDOWS = (1, 5, 9, 15, 25)  # px, the census cost's averaging window
AGREE_PX = 0.5  # a run agrees at a pixel when its left-right error is at most this
CHECKS = (0.5, 1.0)  # px, the self-fusion's check


def pick(runs: dict[str, Views], names: list[str], rank: np.ndarray
         ) -> tuple[np.ndarray, np.ndarray]:
    """Both views' disparities ``[2, H, W]`` of the run of ``names`` whose ``rank
    [N, 2, H, W]`` is the least per pixel and view (the first on a tie), and their left-right
    error as chosen ``[2, H, W]``."""
    stacked = np.stack([np.stack(runs[n]) for n in names])
    disparity = np.take_along_axis(stacked, rank.argmin(0)[None], 0)[0].astype(np.float32)
    return disparity, left_right_error((disparity[0], disparity[1]))


def scene_records(model: object, root: Path, scene: Path, cache: Path, adapt: int
                  ) -> list[dict]:
    """Every setting's scores on ``scene``: over the four runs and the six (item 19's cached
    runs), or, with ``adapt`` steps of adaptation to the pair first (as ``--self-fuse --adapt``
    adapts; :func:`flip_ensemble.adapted`), over the adapted network's four and six runs."""
    left, right = read_image(scene / "left.png"), read_image(scene / "right.png")
    truth = np.load(scene / "gt.npy").astype(np.float32)
    if adapt:
        copy = adapted(model, left, right, adapt)
        runs = network_runs(copy, left, right)
    else:
        runs = scene_runs(model, scene, left, right, cache)
    sets = {"": FOUR, "6 runs ": SIX}
    codes = [census_codes(left), census_codes(right)]
    lefts = np.stack([runs[n][0] for n in FOUR])
    nearest = np.take_along_axis(lefts, np.abs(lefts - truth).argmin(0)[None], 0)[0]

    def record(setting: str, disparity: np.ndarray) -> dict:
        bad, epe = scores(disparity, truth)
        return {"root": str(root), "scene": scene.name, "setting": setting, "refine": True,
                "bad2": bad, "epe": epe}

    records = [record("oracle", nearest)]
    for prefix, names in sets.items():
        errors = np.stack([left_right_error(runs[n]) for n in names])  # [N, 2, H, W]
        choices = {"consistent": errors}
        for window in WINDOWS:
            cost = np.stack([census_cost(codes, as_field(runs[n]), window) for n in names])
            choices[f"census {window}"] = cost
            # a run that agrees always outranks one that does not (costs are at most 24 bits)
            choices[f"agree then census {window}"] = np.where(errors <= AGREE_PX, cost,
                                                              100 + errors)
        for name, rank in choices.items():
            disparity, error = pick(runs, names, rank)
            records.append(record(f"{prefix}{name} raw", disparity[0]))
            records += [record(f"{prefix}{name} check {check:g}",
                               fused(left, right, disparity, error, check)) for check in CHECKS]
    return records


if __name__ == "__main__":
    parser = study_parser(__doc__)
    parser.add_argument("--cache", type=Path, help="folder of the unadapted runs' .npz")
    parser.add_argument("--adapt", type=int, default=0, help="test-time adaptation steps")
    args = parser.parse_args()
    run_study(args.out, args.roots,
              lambda model, root, scene: scene_records(model, root, scene, args.cache, args.adapt),
              {"windows": WINDOWS, "agree_px": AGREE_PX, "checks": CHECKS, "adapt": args.adapt})
