"""SGBM started from the network: a search in a narrow band around the network's disparity
(network-alone item 24). The flow fusion gained most from DIS started from the choice so far
(docs/real-eval.md, "The flow fusion adds DIS started from its own choice"); SGBM takes no
starting field, but it can search the residual: the right image warped by the network's
disparity, so that a slanted surface the network has nearly right becomes a nearly
fronto-parallel one within a few pixels.

Per recorded scene (``record.py``), each view: the other image warped by the view's network
disparity (bilinear, ``cv2.remap``), SGBM (the fusion's block, penalties and uniqueness
:data:`~crossview.models.dense.sgbm_fusion.FUSION_SGBM_UNIQUENESS`) over the residual band
``[-R, R)`` px on the pair widened by repeated border columns, the disparity ``r +
network(x - r)``; both views, then the fusion's left-right check
(:data:`~crossview.models.dense.sgbm_fusion.FUSION_SGBM_CHECK_PX`). Matching images: the
colour images (``colour``) or the fusion's first run's rank images (``rank``,
:data:`~crossview.models.dense.sgbm_fusion.FUSION_SGBM_RUNS`). Scored, left view, bad-2 % on the
known pixels (``adapt_rate.scores``):

- ``IMAGES R cover``: the share (%) of known pixels the checked residual search answers, and
  ``IMAGES R both`` / ``sgbm both``: the residual search's and the fusion's SGBM's bad-2 where
  both answer;
- ``IMAGES R first``: the fusion (:func:`~crossview.models.dense.sgbm_fusion.fusion_steps`,
  steps 2-5 as shipped) with the residual search's value where it answers, SGBM's elsewhere;
  ``IMAGES R after``: SGBM's where it answers, the residual search's in its holes;
  ``IMAGES R only``: the residual search in place of SGBM.

JSON ``{scene: {setting: value}}``; means per root printed.

Run: ``OMP_NUM_THREADS=2 python docs/results/network-alone/residual_sgbm.py /tmp/fusion-rec
docs/results/network-alone/residual_sgbm.json`` (after ``record.py /tmp/fusion-rec
../shared/real-dev ../shared/real-train``).
"""

from __future__ import annotations

import sys
from pathlib import Path

import cv2
import numpy as np

from crossview.data.sgbm_raw import SGBM_SCALE
from crossview.models.dense.classical import SGBM_BLOCK, left_right_checked
from crossview.models.dense.rank_transform import rank_matching_image
from crossview.models.dense.sgbm_fusion import (
    FUSION_SGBM_CHECK_PX,
    FUSION_SGBM_RUNS,
    FUSION_SGBM_UNIQUENESS,
    fusion_steps,
)

sys.path.insert(0, str(Path(__file__).parent))
from adapt_rate import scores
from record import replay

BANDS = (8, 16)  # R: the residual searched, [-R, R) px


def residual_search(image: np.ndarray, other: np.ndarray, network: np.ndarray,
                    band: int) -> np.ndarray:
    """A left view's disparity ``[H, W]`` (NaN at holes) searched in ``[-band, band)`` px
    around ``network [H, W]``: SGBM between ``image`` and ``other`` (``[H, W, C]`` uint8)
    warped by ``network``, the residual ``r`` read back as ``r + network(x - r)``."""
    h, w = network.shape
    columns = np.broadcast_to(np.arange(w, dtype=np.float32), (h, w))
    rows = np.broadcast_to(np.arange(h, dtype=np.float32)[:, None], (h, w))
    warped = cv2.remap(other, columns - network, rows, cv2.INTER_LINEAR,
                       borderMode=cv2.BORDER_REPLICATE)
    pad = 2 * band
    left, right = (cv2.copyMakeBorder(np.ascontiguousarray(i), 0, 0, pad, pad,
                                      cv2.BORDER_REPLICATE) for i in (image, warped))
    channels = image.shape[2]
    matcher = cv2.StereoSGBM_create(
        minDisparity=-band, numDisparities=2 * band, blockSize=SGBM_BLOCK,
        P1=8 * channels * SGBM_BLOCK**2, P2=32 * channels * SGBM_BLOCK**2,
        uniquenessRatio=FUSION_SGBM_UNIQUENESS, speckleWindowSize=100, speckleRange=2,
        mode=cv2.STEREO_SGBM_MODE_SGBM_3WAY)
    raw = matcher.compute(left, right)
    invalid = (-band - 1) * SGBM_SCALE  # OpenCV's mark: (minDisparity - 1) * 16
    residual = np.where(raw > invalid, raw / SGBM_SCALE, np.nan).astype(np.float32)[:, pad:pad + w]
    source = np.clip(columns - np.nan_to_num(residual), 0, w - 1).astype(np.float32)
    return residual + cv2.remap(network, source, np.ascontiguousarray(rows), cv2.INTER_LINEAR)


def checked_residual(d: dict, band: int, images: str) -> np.ndarray:
    """The left view's residual search, left-right checked against the right view's."""
    left, right = d["left_image"], d["right_image"]
    if images == "rank":
        left, right = (rank_matching_image(i, **FUSION_SGBM_RUNS[0]) for i in (left, right))
    mirrored = residual_search(np.ascontiguousarray(right[:, ::-1]),
                               np.ascontiguousarray(left[:, ::-1]),
                               np.ascontiguousarray(d["right_network"][:, ::-1]), band)[:, ::-1]
    own = residual_search(left, right, d["left_network"], band)
    return left_right_checked(own, np.ascontiguousarray(mirrored), FUSION_SGBM_CHECK_PX, "left")


def scene_row(d: dict) -> dict[str, float]:
    """The settings' scores on one recorded scene (module docstring)."""
    image, network, consistent = d["left_image"], d["left_network"], d["left_consistent"]
    classical, truth = d["left_classical"], d["truth"]
    known = np.isfinite(truth)

    def fused(sgbm: np.ndarray) -> float:
        return scores(fusion_steps(network, consistent, sgbm.astype(np.float32), image,
                                   "left").fused, truth)[0]

    row = {"default": scores(d["left_fused"], truth)[0], "default replayed": fused(classical)}
    for images in ("colour", "rank"):
        for band in BANDS:
            name = f"{images} {band}"
            residual = checked_residual(d, band, images)
            both = known & np.isfinite(residual) & np.isfinite(classical)
            row[f"{name} cover"] = float(100 * (known & np.isfinite(residual)).sum() / known.sum())
            row[f"{name} both"] = float(100 * (np.abs(residual - truth)[both] > 2).mean())
            row[f"sgbm both {name}"] = float(100 * (np.abs(classical - truth)[both] > 2).mean())
            row[f"{name} first"] = fused(np.where(np.isfinite(residual), residual, classical))
            row[f"{name} after"] = fused(np.where(np.isfinite(classical), classical, residual))
            row[f"{name} only"] = fused(residual)
    return row


if __name__ == "__main__":
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    replay(Path(sys.argv[1]), Path(sys.argv[2]), scene_row)
