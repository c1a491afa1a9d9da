"""A textured stereo pair whose right image is moved along the rows and the columns, for the
tests of the row alignment (tests/models/test_vertical_alignment.py) and of the runtimes
(tests/export/test_runtime.py, tests/export/test_runtime_self_fused.py), and the pair saved as
image files."""

from __future__ import annotations

from pathlib import Path

import numpy as np
from PIL import Image


def offset_pair(offset: int, h: int, w: int, disparity: int, seed: int
                ) -> tuple[np.ndarray, np.ndarray]:
    """A smooth random texture (RGB uint8 ``[h, w, 3]``) and its right view at constant
    ``disparity``, the right image's rows ``offset`` px down from the left's: left ``(x, y)``
    is right ``(x - disparity, y + offset)``."""
    rng = np.random.default_rng(seed)
    pad = 8
    coarse = rng.integers(0, 256, ((h + 2 * pad) // 4, (w + disparity) // 4 + 1, 3), np.uint8)
    wide = np.asarray(Image.fromarray(coarse).resize((coarse.shape[1] * 4, h + 2 * pad),
                                                     Image.BICUBIC))
    left = wide[pad:pad + h, :w]
    right = wide[pad - offset:pad - offset + h, disparity:disparity + w]
    return np.ascontiguousarray(left), np.ascontiguousarray(right)


def saved_pair(folder: Path, pair: tuple[np.ndarray, np.ndarray]) -> tuple[Path, Path]:
    """``pair`` written as ``folder/left.png`` and ``folder/right.png``; their paths."""
    paths = folder / "left.png", folder / "right.png"
    for path, image in zip(paths, pair, strict=True):
        Image.fromarray(image).save(path)
    return paths
