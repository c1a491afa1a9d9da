"""A textured stereo pair whose right image is moved along the rows and the columns, for the
tests of the row alignment (tests/models/test_vertical_alignment.py) and of the runtime that
repeats it (tests/export/test_runtime.py)."""

from __future__ import annotations

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
