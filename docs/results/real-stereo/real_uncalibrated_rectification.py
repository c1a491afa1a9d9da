"""Rectification without a calibration on real scenes: the right image of each rectified scene
turned by a known camera rotation (as a second photograph taken by hand would be), then matched
by the fused default three ways and scored against the scene's ground truth:

- ``rectified``: the scene's own rectified pair (what the matcher can reach);
- ``turned``: the turned pair as it is (the default lines up one vertical offset, nothing more);
- ``turned_rectified``: the turned pair rectified from its own matches
  (:func:`crossview.geometry.uncalibrated_rectification.rectify_uncalibrated`), matched, and
  the matches mapped back through both homographies and the known turn;
- ``rectified_rectified``: the scene's own rectified pair put through the same rectification
  (what it costs a user who runs it on a pair that needed none).

Each score is given over the scene's valid pixels and (``_seen``) over those whose true match
the turned right image still shows (a turn moves part of the image out of the frame). With
``--interpolation NAME`` the rectification resamples with OpenCV's ``INTER_NAME`` (default:
the module's :data:`~crossview.geometry.uncalibrated_rectification.INTERPOLATION`).

Each left pixel ``p`` is scored by the x of its match in the scene's own right image: the
network's field gives the match in the image it matched against, which the inverse
homographies (and the inverse turn) carry back; the disparity is ``p.x`` minus that x (bad-2 %
over the scene's valid pixels). The turn: the right camera rotated by ``TURN_DEGREES`` (about
x, y, z) with a focal of the image width, and its rows moved by ``TURN_ROWS`` px; what the
turn brings into the frame repeats the image's edge (a photograph would show more scene).

Run: ``OMP_NUM_THREADS=2 python docs/results/real-stereo/real_uncalibrated_rectification.py OUT.json
ROOT [--interpolation cubic]``.
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

import numpy as np
import torch

import crossview
from crossview.data.datasets.scenes import SceneFolders
from crossview.data.rig_calibration import require_opencv
from crossview.geometry import uncalibrated_rectification
from crossview.geometry.uncalibrated_rectification import (
    apply_homography,
    camera_matrix,
    rectify_uncalibrated,
    rotation,
)
from crossview.models.dense.inference import predict_fields

TURN_DEGREES = (1.0, 2.0, 1.5)
TURN_ROWS = 3.0


def turn(height: int, width: int) -> np.ndarray:
    """The homography ``[3, 3]`` of the right camera's turn (original -> turned pixel)."""
    k = camera_matrix(float(width), height, width)
    moved = np.array([[1.0, 0.0, 0.0], [0.0, 1.0, TURN_ROWS], [0.0, 0.0, 1.0]])
    return moved @ k @ rotation(np.radians(TURN_DEGREES)) @ np.linalg.inv(k)


def matches(model: torch.nn.Module, left: np.ndarray, right: np.ndarray) -> np.ndarray:
    """The left view's matches ``[H, W, 2]`` (x, y px in ``right``) of the fused default."""
    field = predict_fields(model, left, right, "stereo").field[0].numpy().astype(np.float64)
    h, w = left.shape[:2]
    ys, xs = np.mgrid[0:h, 0:w]
    return np.stack([xs + field[..., 0], ys + field[..., 1]], axis=-1)


def bad2(disparity: np.ndarray, truth: np.ndarray, valid: np.ndarray) -> float:
    """bad-2 % over ``valid`` (a NaN disparity counts as wrong)."""
    error = np.abs(disparity - truth)[valid]
    return float(100 * np.mean(~(error <= 2)))


def rectified_disparity(model: torch.nn.Module, left: np.ndarray, right: np.ndarray,
                        back: np.ndarray) -> tuple[np.ndarray, np.ndarray, dict]:
    """``left`` and ``right`` rectified from their matches and matched; per left pixel, the
    disparity ``[H, W]`` and row ``[H, W]`` of its match carried back through the homographies
    and ``back`` (right image -> the scene's right image), and what the rectification found."""
    cv2 = require_opencv()
    h, w = left.shape[:2]
    ys, xs = np.mgrid[0:h, 0:w].astype(np.float64)
    start = time.perf_counter()
    pair = rectify_uncalibrated(left, right)
    seconds = time.perf_counter() - start
    found = matches(model, pair.left, pair.right)  # [H, W, 2] in the rectified right image
    at = apply_homography(pair.left_homography, np.stack([xs, ys], axis=-1)).astype(np.float32)
    sampled = np.stack([cv2.remap(np.ascontiguousarray(found[..., i]).astype(np.float32),
                                  at[..., 0], at[..., 1], cv2.INTER_LINEAR,
                                  borderMode=cv2.BORDER_REPLICATE) for i in range(2)], axis=-1)
    original = apply_homography(back, apply_homography(np.linalg.inv(pair.right_homography),
                                                sampled.astype(np.float64)))
    return xs - original[..., 0], original[..., 1], {
        "matches": pair.matches, "row_error": pair.row_error, "focal": pair.focal,
        "disparity_shift": pair.disparity_shift, "rectify_seconds": seconds}


def scene_scores(model: torch.nn.Module, sample: dict) -> dict:
    """The scores of one scene and what the rectification found."""
    cv2 = require_opencv()
    left, right = sample["image0"], sample["image1"]
    truth, valid = sample["disparity"], np.asarray(sample["valid"], bool) & np.isfinite(
        sample["disparity"])
    h, w = left.shape[:2]
    ys, xs = np.mgrid[0:h, 0:w].astype(np.float64)
    turned_homography = turn(h, w)
    turned_right = cv2.warpPerspective(right, turned_homography, (w, h), flags=cv2.INTER_LINEAR,
                                       borderMode=cv2.BORDER_REPLICATE)
    back = np.linalg.inv(turned_homography)
    truth_at = apply_homography(turned_homography,
                                np.stack([xs - np.nan_to_num(truth), ys], axis=-1))
    seen = valid & (truth_at[..., 0] >= 1) & (truth_at[..., 0] <= w - 2) & (
        truth_at[..., 1] >= 1) & (truth_at[..., 1] <= h - 2)
    turned = apply_homography(back, matches(model, left, turned_right))
    disparities = {"rectified": xs - matches(model, left, right)[..., 0],
                   "turned": xs - turned[..., 0]}
    disparities["turned_rectified"], rows, found = rectified_disparity(model, left, turned_right,
                                                                       back)
    disparities["rectified_rectified"], _, again = rectified_disparity(model, left, right,
                                                                       np.eye(3))
    scores = {name: bad2(value, truth, valid) for name, value in disparities.items()}
    scores.update({f"{name}_seen": bad2(value, truth, seen) for name, value in disparities.items()})
    scores.update(found, seen_share=float(seen.sum() / valid.sum()),
                  row_error_after=float(np.median(np.abs(rows - ys)[valid])),
                  rectified_focal=again["focal"])
    return scores


def main(out: Path, root: str, interpolation: str | None = None) -> None:
    """Score every stereo scene under ``root``; write ``{scene: scores, "mean": ...}``
    (``interpolation``: the rectification's, default the module's)."""
    interpolation = interpolation or uncalibrated_rectification.INTERPOLATION
    uncalibrated_rectification.INTERPOLATION = interpolation
    torch.set_num_threads(2)
    model = crossview.load_model("matchstereo-hybrid")
    records: dict[str, dict] = {}
    for sample in SceneFolders(root, task="stereo"):
        records[sample["name"]] = scene_scores(model, sample)
        print(sample["name"], {k: v if v is None else round(v, 2)
                               for k, v in records[sample["name"]].items()}, flush=True)
    records["mean"] = {key: float(np.mean([r[key] for r in records.values()]))
                       for key in next(iter(records.values()))
                       if all(r[key] is not None for r in records.values())}
    print("mean", records["mean"])
    out.write_text(json.dumps({"turn_degrees": TURN_DEGREES, "turn_rows": TURN_ROWS,
                               "interpolation": interpolation, "scenes": records}, indent=1))


if __name__ == "__main__":
    main(Path(sys.argv[1]), sys.argv[2],
         *(sys.argv[4:5] if sys.argv[3:4] == ["--interpolation"] else []))
