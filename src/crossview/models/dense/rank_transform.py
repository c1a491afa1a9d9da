"""The rank transform of an image, and the images SGBM matches with it.

The rank transform (Zabih and Woodfill, "Non-parametric local transforms for computing visual
correspondence", ECCV 1994) replaces each pixel by the number of pixels of its
``(2r + 1) x (2r + 1)`` window that are darker than it. The count depends only on the order of
the intensities in the window, so any monotonic change of them (a gain, a gamma, a different
exposure, a slow change of lighting across the image) leaves it as it is, and a single bright or
dark outlier moves it by at most one. SGBM compares intensities: on pairs whose two images
disagree in brightness (the lighting of Middlebury's PianoL, the exposure of Piano, the
reflections of Lampshade) it answers with wrong matches that its checks keep; on the rank
transform it matches what the two images share.

:func:`rank_matching_image` is what the fused stereo default feeds SGBM first
(:mod:`crossview.models.dense.sgbm_fusion`): the grey image twice and its rank transform by
default, so that SGBM's cost (a sum over the three channels) weighs intensity two to one against
rank.
"""

from __future__ import annotations

import numpy as np

from crossview.models.dense.classical import grey_image


def rank_transform(grey: np.ndarray, radius: int) -> np.ndarray:
    """The rank transform of a grey uint8 image ``[H, W]``: per pixel the number of pixels of
    its ``(2 radius + 1)^2`` window (the image's border repeated beyond it) whose value is
    below the pixel's, scaled from ``0..(2 radius + 1)^2 - 1`` to 0..255 and rounded: ``[H, W]``
    uint8.

    >>> rank_transform(np.array([[10, 20, 30]], np.uint8), 1).tolist()  # 0, 3 and 3 of 8 below
    [[0, 96, 96]]
    """
    if grey.ndim != 2 or grey.dtype != np.uint8:
        raise ValueError(f"need a grey uint8 [H, W] image, got {grey.shape} {grey.dtype}")
    if radius < 1:
        raise ValueError(f"radius must be at least 1, got {radius}")
    h, w = grey.shape
    size = 2 * radius + 1
    padded = np.pad(grey, radius, mode="edge")
    count = np.zeros((h, w), np.uint8 if size * size <= 256 else np.uint16)
    below = np.empty((h, w), bool)  # one buffer for every comparison, added as 0 / 1 bytes
    for dy in range(size):
        rows = padded[dy:dy + h]
        for dx in range(size):
            np.less(rows[:, dx:dx + w], grey, out=below)
            np.add(count, below.view(np.uint8), out=count)
    scale = 255.0 / (size * size - 1)
    return np.rint(count * scale).astype(np.uint8)


def rank_matching_image(image: np.ndarray, radius: int, grey_channels: int = 2) -> np.ndarray:
    """An RGB uint8 image ``[H, W, 3]`` as the three channels SGBM matches first in the fused
    default: ``grey_channels`` (0-2) copies of its grey image (OpenCV's weights), the rest the
    grey image's :func:`rank_transform` of ``radius``: ``[H, W, 3]`` uint8."""
    if image.ndim != 3 or image.shape[2] != 3 or image.dtype != np.uint8:
        raise ValueError(f"need an RGB uint8 [H, W, 3] image, got {image.shape} {image.dtype}")
    if grey_channels not in (0, 1, 2):
        raise ValueError(f"grey_channels must be 0, 1 or 2, got {grey_channels}")
    grey = grey_image(image)
    rank = rank_transform(grey, radius)
    return np.dstack([grey] * grey_channels + [rank] * (3 - grey_channels))
