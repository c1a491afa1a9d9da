"""Float images as the uint8 arrays OpenCV's matchers take, without torch (shared by
:func:`crossview.data.image_batch.uint8_images` and :mod:`crossview.runtime`)."""

from __future__ import annotations

import numpy as np


def as_uint8(image: np.ndarray) -> np.ndarray:
    """An image of any shape (``[H, W, 3]`` RGB, float 0..255) rounded (half to even) and
    clamped to 0..255, as uint8.

    >>> as_uint8(np.array([[0.5, 1.5, 254.6, 300.0]], np.float32)).tolist()
    [[0, 2, 255, 255]]
    """
    return np.clip(np.round(image), 0, 255).astype(np.uint8)
