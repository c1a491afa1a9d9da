"""The pull towards parallel cameras of the rectification without a calibration, chosen by
leave-one-group-out on real scenes, by the rows of the scenes' true correspondences.

For every stereo scene under ROOT the pair is rectified from its own matches
(:func:`crossview.geometry.uncalibrated_rectification.rectify_uncalibrated`) as it is and with
its right image turned by that study's turn (``real_uncalibrated_rectification.turn``: what
a second photograph taken by hand does) and by a turn :data:`LARGE` times as large, with each
setting of ``PRIOR_RADIANS`` x ``PRIOR_FOCAL_POWER``. Each valid
left pixel and its true match (the ground truth's disparity; turned with the right image) are
carried through the two homographies; the score is the share (%) of pixels whose rows then
differ by more than 1 px, the mean of the three pairs. No network runs: the score is the
rectification's alone. The setting with the lowest mean share over the other groups is chosen
for each group (``real_choice.py``'s groups), and the left-out shares are reported.

Run: ``python docs/results/real-stereo/real_rectification_prior.py OUT.json ../shared/real-train``.
"""

from __future__ import annotations

import itertools
import json
import sys
from pathlib import Path

import numpy as np

from crossview.data.datasets.scenes import SceneFolders
from crossview.data.rig_calibration import require_opencv
from crossview.geometry import uncalibrated_rectification
from crossview.geometry.uncalibrated_rectification import apply_homography

sys.path.insert(0, str(Path(__file__).parent))
import real_uncalibrated_rectification as turning
from real_choice import choose, scene_groups
from real_uncalibrated_rectification import turn

RADIANS = (0.1, 0.2, 0.5, 1.0, 2.0)
FOCAL_POWERS = (5.0, 20.0, 100.0)
LARGE = 3.0
ROW_PX = 1.0


def large_turn(height: int, width: int) -> np.ndarray:
    """The study's turn with its angles :data:`LARGE` times as large (same row offset)."""
    degrees = turning.TURN_DEGREES
    turning.TURN_DEGREES = tuple(LARGE * angle for angle in degrees)
    try:
        return turn(height, width)
    finally:
        turning.TURN_DEGREES = degrees


def misrowed(left: np.ndarray, right: np.ndarray, truth: np.ndarray, valid: np.ndarray,
             right_turn: np.ndarray) -> float:
    """The share (%) of ``valid`` pixels whose true match (``truth [H, W]``, then moved by
    ``right_turn [3, 3]``) lies more than :data:`ROW_PX` rows off after rectification."""
    pair = uncalibrated_rectification.rectify_uncalibrated(left, right)
    ys, xs = np.nonzero(valid)
    points0 = np.column_stack([xs, ys]).astype(np.float64)
    shifted = points0 - np.column_stack([truth[valid], np.zeros(len(xs))])
    points1 = apply_homography(right_turn, shifted)
    rows = (apply_homography(pair.left_homography, points0)[:, 1]
            - apply_homography(pair.right_homography, points1)[:, 1])
    return float(100 * np.mean(np.abs(rows) > ROW_PX))


def main(out: Path, root: Path) -> None:
    cv2 = require_opencv()
    table: dict[str, dict[str, float]] = {}
    for sample in SceneFolders(root, task="stereo"):
        left, right, truth = sample["image0"], sample["image1"], sample["disparity"]
        valid = np.asarray(sample["valid"], bool) & np.isfinite(truth)
        h, w = truth.shape
        turns = [np.eye(3), turn(h, w), large_turn(h, w)]
        pairs = [cv2.warpPerspective(right, homography, (w, h), flags=cv2.INTER_LINEAR,
                                     borderMode=cv2.BORDER_REPLICATE) for homography in turns]
        for radians, power in itertools.product(RADIANS, FOCAL_POWERS):
            uncalibrated_rectification.PRIOR_RADIANS = radians
            uncalibrated_rectification.PRIOR_FOCAL_POWER = power
            share = np.mean([misrowed(left, image, truth, valid, homography)
                             for image, homography in zip(pairs, turns, strict=True)])
            table.setdefault(f"radians{radians:g}_power{power:g}", {})[sample["name"]] = share
        print(sample["name"], {k: round(v[sample["name"]], 2) for k, v in table.items()},
              flush=True)
    scenes = sorted(next(iter(table.values())))
    groups = scene_groups(root)
    group_of = {scene: groups.get(scene, scene) for scene in scenes}
    chosen, left_out = {}, {}
    for group in sorted(set(group_of.values())):
        setting = choose(table, [s for s in scenes if group_of[s] != group])
        chosen[group] = setting
        left_out.update({s: table[setting][s] for s in scenes if group_of[s] == group})
    means = {setting: float(np.mean(list(values.values()))) for setting, values in table.items()}
    final = choose(table, scenes)
    print("means", {k: round(v, 3) for k, v in means.items()})
    print(f"final {final}; left-out mean {np.mean(list(left_out.values())):.3f} "
          f"(all scenes, final {means[final]:.3f})")
    out.write_text(json.dumps({"root": str(root), "row_px": ROW_PX, "table": table,
                               "means": means, "chosen_without_group": chosen,
                               "left_out": left_out, "final": final}, indent=1))


if __name__ == "__main__":
    main(Path(sys.argv[1]), Path(sys.argv[2]))
