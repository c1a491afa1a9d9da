"""A stereo pair for :mod:`crossview.runtime`, without torch: paths (read with OpenCV) or RGB
uint8 ``[H, W, 3]`` arrays, checked against the size a file takes."""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np

from crossview.errors import UserError
from crossview.models.dense.classical import require_cv2

ImageInput = str | os.PathLike | np.ndarray


def read_rgb(image: ImageInput, name: str) -> np.ndarray:
    """``image`` as an RGB uint8 ``[H, W, 3]`` array: a path read with OpenCV (orientation
    tag applied, 16-bit images scaled to 8 bits, grey images as three equal channels), or an
    array passed through after its check. ``name`` says which image it is in the
    :class:`UserError` of a missing file, a file that is not an image, or an array of another
    form."""
    if isinstance(image, np.ndarray):
        if image.dtype != np.uint8 or image.ndim != 3 or image.shape[2] != 3:
            raise UserError(f"the {name} image as an array must be RGB uint8 [H, W, 3], got "
                            f"{image.shape=} {image.dtype=}")
        return image
    path = Path(image)
    if not path.is_file():
        raise UserError(f"{path}: no such file (the {name} image)")
    opencv = require_cv2("reading images")
    bgr = opencv.imread(str(path), opencv.IMREAD_COLOR)
    if bgr is None:
        raise UserError(f"{path}: not an image OpenCV can read (the {name} image)")
    return opencv.cvtColor(bgr, opencv.COLOR_BGR2RGB)


def read_pair(left: ImageInput, right: ImageInput,
              size: tuple[int, int]) -> tuple[np.ndarray, np.ndarray]:
    """The pair as RGB uint8 ``[H, W, 3]`` arrays (:func:`read_rgb`), a :class:`UserError`
    unless both are ``size = (H, W)``, the size the file takes."""
    pair = read_rgb(left, "left"), read_rgb(right, "right")
    for name, image in zip(("left", "right"), pair, strict=True):
        if image.shape[:2] != tuple(size):
            raise UserError(f"the {name} image is {image.shape[0]}x{image.shape[1]} (HxW); the "
                            f"file takes {size[0]}x{size[1]}: export one at this size "
                            "(crossview export onnx --size HxW)")
    return pair
