"""Images in every form the public API accepts, as one float tensor batch.

Forms: a path, a PIL image, an ``[H, W, 3]`` uint8 numpy array, or a float tensor
``[B, 3, H, W]`` with values 0..255 (docs/conventions.md, "Images").
"""

from __future__ import annotations

import os

import numpy as np
import torch
from PIL import Image

from crossview.data.image_arrays import as_uint8
from crossview.data.io import read_image

ImageLike = str | os.PathLike | Image.Image | np.ndarray | torch.Tensor


def as_image_batch(image: ImageLike, name: str = "image") -> torch.Tensor:
    """Any accepted image form as a float32 tensor ``[B, 3, H, W]`` with values 0..255.

    ``name`` says which argument it is in errors: ``TypeError``/``ValueError`` for a wrong
    form, an empty image or (tensors) NaN or infinite values.

    >>> as_image_batch(np.zeros((4, 6, 3), np.uint8)).shape
    torch.Size([1, 3, 4, 6])
    """
    if isinstance(image, str | os.PathLike):
        image = read_image(image)
    if isinstance(image, Image.Image):
        image = np.asarray(image.convert("RGB"))
    if isinstance(image, np.ndarray):
        if image.dtype != np.uint8 or image.ndim != 3 or image.shape[2] != 3:
            raise TypeError(f"{name} as a numpy array must be [H, W, 3] uint8, got "
                            f"{image.shape=} {image.dtype=}")
        batch = torch.from_numpy(image.copy()).permute(2, 0, 1)[None].float()
    elif isinstance(image, torch.Tensor):
        if image.ndim != 4 or image.shape[1] != 3 or not image.is_floating_point():
            raise ValueError(f"{name} as a tensor must be float [B, 3, H, W] (0..255), got "
                             f"{image.shape=} {image.dtype=}")
        batch = image.float()
        if batch.numel() and torch.isnan(batch).any():
            raise ValueError(f"{name} holds NaN values")
        if batch.numel() and torch.isinf(batch).any():
            raise ValueError(f"{name} holds infinite values")
    else:
        raise TypeError(f"{name} must be a path, PIL image, numpy array or tensor, got "
                        f"{type(image).__name__}")
    if batch.numel() == 0:
        raise ValueError(f"{name} is empty: shape {list(batch.shape)} ([B, 3, H, W])")
    return batch


def sample_image(image: np.ndarray) -> torch.Tensor:
    """A benchmark sample's image ``[H, W, 3]`` (uint8, or float 0..255) as float32
    ``[1, 3, H, W]``, the API's float form."""
    return torch.from_numpy(np.ascontiguousarray(image, np.float32)).permute(2, 0, 1)[None]


def uint8_images(x: torch.Tensor) -> list[np.ndarray]:
    """A batch ``[B, 3, H, W]`` (0..255) as ``B`` RGB uint8 arrays ``[H, W, 3]`` (rounded,
    clamped: :func:`crossview.data.image_arrays.as_uint8`; on the CPU), as OpenCV's matchers
    take them."""
    return [as_uint8(image.detach().permute(1, 2, 0).cpu().numpy()) for image in x]
