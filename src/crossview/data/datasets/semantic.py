"""The common shape of the semantic-correspondence readers (SPair-71k, PF-PASCAL, PF-WILLOW).

A sample is a pair of images of two instances of one category with annotated keypoints:

===================  ======================  =============================================
key                  value                   meaning
===================  ======================  =============================================
``name``             str                     the pair's identifier in the release
``category``         str                     object category
``image0``           uint8 ``[H0, W0, 3]``   source image
``image1``           uint8 ``[H1, W1, 3]``   target image (its size may differ)
``keypoints0``       float32 ``[N, 2]``      source keypoints, pixel ``(x, y)``
``keypoints1``       float32 ``[N, 2]``      the corresponding target keypoints
``valid_keypoints``  bool ``[N]``            both keypoints annotated (others are set to 0)
``bbox0``, ``bbox1`` float32 ``[4]``         object box ``(x0, y0, x1, y1)`` (if released)
===================  ======================  =============================================

PCK is evaluated on these keys by :mod:`crossview.metrics.keypoints`.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from crossview.data.datasets.base import BenchmarkDataset, Sample
from crossview.errors import UserError


def keypoint_pair(src: Any, tgt: Any, where: str) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``(keypoints0, keypoints1, valid)`` from two ``[N, 2]`` arrays; a keypoint pair is valid
    when all four coordinates are finite (releases mark missing points with NaN)."""
    src = np.asarray(src, np.float64).reshape(-1, 2)
    tgt = np.asarray(tgt, np.float64).reshape(-1, 2)
    if src.shape != tgt.shape:
        raise UserError(f"{where}: {len(src)} source but {len(tgt)} target keypoints")
    valid = np.isfinite(src).all(axis=1) & np.isfinite(tgt).all(axis=1)
    zero = np.zeros_like(src)
    return (np.where(valid[:, None], src, zero).astype(np.float32),
            np.where(valid[:, None], tgt, zero).astype(np.float32), valid)


def bounding_box(value: Any, where: str) -> np.ndarray:
    """An annotated object box ``(x0, y0, x1, y1)`` as float32 ``[4]``; anything else (another
    count, non-numbers, non-finite values) is a :class:`UserError` naming ``where``."""
    try:
        box = np.asarray(value, np.float64).reshape(-1)
    except (TypeError, ValueError):
        box = np.empty(0)
    if box.shape != (4,) or not np.isfinite(box).all():
        raise UserError(f"{where}: a bounding box is 4 finite numbers (x0, y0, x1, y1), got "
                        f"{value!r}")
    return box.astype(np.float32)


class SemanticDataset(BenchmarkDataset):
    """A :class:`BenchmarkDataset` whose samples are keypoint-annotated image pairs."""

    task = "semantic"

    def __getitem__(self, index: int) -> Sample:
        if not 0 <= index < len(self.entries):
            raise IndexError(f"index {index} out of range for {len(self.entries)} samples")
        sample = self.load(self.entries[index])
        n = len(sample["valid_keypoints"])
        for key in ("keypoints0", "keypoints1"):
            if sample[key].shape != (n, 2):
                raise UserError(f"{self.root}: pair {sample['name']}: {key} is "
                                f"{sample[key].shape}, expected ({n}, 2)")
        return sample
