"""What the streams of unlabelled real crops share (:mod:`.image_sequences` for flow,
:mod:`.stereo_pairs` for stereo): ``length`` samples, each a pure function of
``(seed, index)`` through its own random generator, images read as float tensors and
enlarged to cover the crop when they are smaller."""

from __future__ import annotations

import numpy as np
import torch
import torch.nn.functional as F
from torch.utils.data import Dataset


class CropStream(Dataset):
    """``length`` samples of crops ``(h, w)``; :meth:`generator` gives sample ``index`` its
    random generator (and refuses an index out of range)."""

    def __init__(self, length: int, crop: tuple[int, int], seed: int) -> None:
        if length < 1 or min(crop) < 1:
            raise ValueError(f"length and crop must be positive, got {length=}, {crop=}")
        self.length = length
        self.crop = crop
        self.seed = seed

    def __len__(self) -> int:
        return self.length

    def generator(self, index: int) -> np.random.Generator:
        """The random generator of sample ``index`` (seeded by ``(seed, index)``)."""
        if not 0 <= index < self.length:
            raise IndexError(f"index {index} out of range for {self.length} samples")
        return np.random.default_rng([self.seed, index])

    def crop_window(self, rng: np.random.Generator, shape: torch.Size) -> tuple[slice, ...]:
        """A random window of the crop's size inside images ``[3, H, W]`` of ``shape``."""
        _, h, w = shape
        top = int(rng.integers(h - self.crop[0] + 1))
        start = int(rng.integers(w - self.crop[1] + 1))
        return (slice(None), slice(top, top + self.crop[0]), slice(start, start + self.crop[1]))


def as_tensor(image: np.ndarray) -> torch.Tensor:
    """An image as read (``[H, W, 3]``, 0..255) -> ``float32 [3, H, W]``."""
    return torch.from_numpy(image).permute(2, 0, 1).float()


def cover(image: torch.Tensor, crop: tuple[int, int]) -> torch.Tensor:
    """``image [3, H, W]`` enlarged (bilinear, aspect kept) until it covers ``crop``."""
    _, h, w = image.shape
    scale = max(crop[0] / h, crop[1] / w)
    if scale <= 1:
        return image
    size = (max(crop[0], int(np.ceil(h * scale))), max(crop[1], int(np.ceil(w * scale))))
    return F.interpolate(image[None], size=size, mode="bilinear", align_corners=False)[0]
