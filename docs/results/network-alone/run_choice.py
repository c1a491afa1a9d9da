"""How the self-fusion picks among its runs (issue 50 item 2, item 19).

Item 18 ships four runs (the pair and its mirrored swapped copy at 1 and 1.5 times the pair's
size) and takes per pixel and view the run whose two views agree best there, then fuses the
views with a 1 px check. Two questions with the runs fixed: is the per-pixel choice too
eager (a run wrong but consistent at one pixel wins it; choosing by the error averaged over a
window keeps each region with one run), and does the 1 px check, chosen for one run (items
10 and 17), still hold for four? And would the runs at 1.25 (six runs) add anything?

For every scene the six runs ``id``, ``h``, ``x1.25``, ``x1.25h``, ``x1.5``, ``x1.5h``
(:func:`flip_ensemble.network_views`, kept in ``--cache`` as ``.npz`` so that reruns skip the
network) and the settings:

- ``4 runs check T``: item 18's choice, self-fused with the check at T px (0.5, 0.75, 1, 1.5;
  ``4 runs check 1`` is what ``--self-fuse`` gives);
- ``4 runs window K``: each run's left-right error averaged over a K x K window (3, 7, 15 px)
  before the choice, self-fused at 1 px;
- ``6 runs check 1``, ``6 runs window 7``: the same with the runs at 1.25 as well.

Records as :mod:`flip_ensemble` writes them, for ``real_choice.py``.

Run: ``OMP_NUM_THREADS=2 python docs/results/network-alone/run_choice.py OUT.json
../shared/real-train ../shared/real-dev --cache /tmp/run-cache`` then ``python
docs/results/real-stereo/real_choice.py OUT.json ../shared/real-train``
"""

from __future__ import annotations

import sys
from pathlib import Path

import cv2
import numpy as np

from crossview.data.io import read_image
from crossview.models.dense import self_fusion

sys.path.insert(0, str(Path(__file__).parent))
from adapt_rate import scores
from flip_ensemble import Views, left_right_error, network_views, run_study, study_parser

FOUR = ["id", "h", "x1.5", "x1.5h"]
SIX = ["id", "h", "x1.25", "x1.25h", "x1.5", "x1.5h"]
CHECKS = (0.5, 0.75, 1.0, 1.5)  # px
WINDOWS = (3, 7, 15)  # px


def network_runs(model: object, left: np.ndarray, right: np.ndarray) -> dict[str, Views]:
    """The six runs of the module docstring of ``model`` on the pair ``[H, W, 3]``."""
    runs = {}
    for name in SIX:
        scale = 1.0 if name in ("id", "h") else float(name[1:].rstrip("h"))
        size = None if scale == 1 else (round(left.shape[0] * scale), round(left.shape[1] * scale))
        runs[name] = network_views(model, left, right, name.endswith("h"), False, size=size)
    return runs


def scene_runs(model: object, scene: Path, left: np.ndarray, right: np.ndarray,
               cache: Path) -> dict[str, Views]:
    """The six runs of the module docstring on ``scene``, from ``cache`` where kept there."""
    kept = cache / f"{scene.parent.name}-{scene.name}.npz"
    if kept.is_file():
        arrays = np.load(kept)
        return {name: (arrays[f"{name}/left"], arrays[f"{name}/right"]) for name in SIX}
    runs = network_runs(model, left, right)
    cache.mkdir(parents=True, exist_ok=True)
    np.savez(kept, **{f"{name}/{view}": runs[name][k] for name in SIX
                      for k, view in enumerate(("left", "right"))})
    return runs


def chosen(runs: dict[str, Views], names: list[str], window: int = 1
           ) -> tuple[np.ndarray, np.ndarray]:
    """Both views' disparities ``[2, H, W]`` of the run of ``names`` whose left-right error
    (averaged over ``window x window`` px; 1: the pixel's own) is the least per pixel and
    view (the first on a tie), and their left-right error as chosen ``[2, H, W]`` (as
    ``--self-fuse`` checks them)."""
    errors = np.stack([left_right_error(runs[n]) for n in names])  # [N, 2, H, W]
    ranked = errors if window == 1 else np.stack([
        np.stack([cv2.blur(view, (window, window), borderType=cv2.BORDER_REFLECT)
                  for view in run]) for run in errors])
    pick = ranked.argmin(0)[None]
    disparity = np.take_along_axis(np.stack([np.stack(runs[n]) for n in names]), pick, 0)[0]
    return disparity.astype(np.float32), left_right_error((disparity[0], disparity[1]))


def fused(left: np.ndarray, right: np.ndarray, disparity: np.ndarray, error: np.ndarray,
          check: float) -> np.ndarray:
    """The left view self-fused with the check at ``check`` px (the module constant set for
    the call)."""
    self_fusion.SELF_FUSION_CHECK_PX = check
    return self_fusion.self_fused_disparities([left, right], disparity, error)[0]


def scene_records(model: object, root: Path, scene: Path, cache: Path) -> list[dict]:
    """Every setting's scores on ``scene``."""
    left, right = read_image(scene / "left.png"), read_image(scene / "right.png")
    truth = np.load(scene / "gt.npy").astype(np.float32)
    runs = scene_runs(model, scene, left, right, cache)
    settings = {f"4 runs check {c:g}": (FOUR, 1, c) for c in CHECKS}
    settings |= {f"4 runs window {w}": (FOUR, w, 1.0) for w in WINDOWS}
    settings |= {"6 runs check 1": (SIX, 1, 1.0), "6 runs window 7": (SIX, 7, 1.0)}
    records = []
    for name, (names, window, check) in settings.items():
        bad, epe = scores(fused(left, right, *chosen(runs, names, window), check), truth)
        records.append({"root": str(root), "scene": scene.name, "setting": name,
                        "refine": True, "bad2": bad, "epe": epe})
    return records


if __name__ == "__main__":
    parser = study_parser(__doc__)
    parser.add_argument("--cache", type=Path, required=True, help="folder of the runs' .npz")
    args = parser.parse_args()
    run_study(args.out, args.roots,
              lambda model, root, scene: scene_records(model, root, scene, args.cache),
              {"checks": CHECKS, "windows": WINDOWS})
