"""A stereo pair for :mod:`crossview.runtime`, without torch: paths (read as ``crossview
stereo`` reads them) or RGB uint8 ``[H, W, 3]`` arrays, checked against the size a file takes,
and as a network file's input."""

from __future__ import annotations

import os

import numpy as np

from crossview.data.io import read_image
from crossview.errors import UserError

ImageInput = str | os.PathLike | np.ndarray


def read_rgb(image: ImageInput, name: str) -> np.ndarray:
    """``image`` as an RGB uint8 ``[H, W, 3]`` array: a path read as ``crossview stereo``
    reads it (:func:`crossview.data.io.read_image`: EXIF orientation applied, 16-bit images
    by their high byte, grey as three equal channels), or an array passed through after its
    check; ``name`` says which image in its :class:`UserError`."""
    if isinstance(image, np.ndarray):
        if image.dtype != np.uint8 or image.ndim != 3 or image.shape[2] != 3:
            raise UserError(f"the {name} image as an array must be RGB uint8 [H, W, 3], got "
                            f"{image.shape=} {image.dtype=}")
        return image
    try:
        return read_image(image)
    except UserError as error:
        raise UserError(f"{error} (the {name} image)") from None


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


def network_input(image: np.ndarray) -> np.ndarray:
    """RGB uint8 ``[H, W, 3]`` as an exported network's input ``[1, 3, H, W]`` float32
    0..255."""
    return np.ascontiguousarray(image.transpose(2, 0, 1)[None], dtype=np.float32)
