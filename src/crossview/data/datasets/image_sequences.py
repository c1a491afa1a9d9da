"""Unlabelled real frame pairs from folders of image sequences, for self-supervised optical-flow
training (the time reversal and flips below would break a rectified stereo pair).

``root`` holds one folder per sequence; each holds two or more frames (any file
:func:`crossview.data.io.read_image` reads, with an image suffix), ordered by file name::

    ROOT/traffic/0000.png, 0001.png, ...
    ROOT/rubberwhale/frame10.png, frame11.png

A pair is two frames of one sequence at most ``max_gap`` apart. Sample ``i`` is a pure function
of ``(seed, i)``: it picks a sequence uniformly (so one long video does not drown the short
ones), a pair in it, a random crop of ``crop`` (frames smaller than the crop are first enlarged
to cover it), and with probability 0.5 each a time reversal (frames swapped) and a horizontal
flip of both frames. Frames are read when a sample needs them, never cached.

Samples: ``img0``, ``img1`` ``float32 [3, h, w]`` in 0..255 (the trainer's layout, no labels).
A root without any sequence of two frames, or a frame that cannot be read, is a
:class:`~crossview.errors.UserError` naming the folder or the file.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import torch
import torch.nn.functional as F
from torch.utils.data import Dataset

from crossview.data.io import read_image
from crossview.errors import UserError

IMAGE_SUFFIXES = (".png", ".jpg", ".jpeg", ".ppm", ".pgm", ".bmp", ".tif", ".tiff")


def find_sequences(root: str | Path) -> list[list[Path]]:
    """The sequences under ``root``: per sub-folder (sorted by name), its frames sorted by
    name; folders with fewer than two frames are skipped."""
    root = Path(root)
    if not root.is_dir():
        raise UserError(f"image sequences: {root} is not a folder")
    sequences = []
    for folder in sorted(p for p in root.iterdir() if p.is_dir()):
        frames = sorted(p for p in folder.iterdir()
                        if p.is_file() and p.suffix.lower() in IMAGE_SUFFIXES)
        if len(frames) >= 2:
            sequences.append(frames)
    if not sequences:
        raise UserError(f"image sequences: no folder under {root} holds two or more frames "
                        f"({', '.join(IMAGE_SUFFIXES)})")
    return sequences


class ImageSequencePairs(Dataset):
    """Random crops of frame pairs from :func:`find_sequences`, ``length`` samples.

    Args:
        root: the folder of sequences.
        length: number of samples (the stream is unlimited; this is the epoch).
        crop: ``(h, w)`` of every sample.
        max_gap: largest frame distance of a pair (1: consecutive frames only).
        seed: the stream's seed.
    """

    def __init__(self, root: str | Path, length: int, crop: tuple[int, int], *,
                 max_gap: int = 2, seed: int = 0) -> None:
        if length < 1 or max_gap < 1 or min(crop) < 1:
            raise ValueError(f"length, max_gap and crop must be positive, got {length=}, "
                             f"{max_gap=}, {crop=}")
        self.sequences = find_sequences(root)
        self.length = length
        self.crop = crop
        self.max_gap = max_gap
        self.seed = seed

    def __len__(self) -> int:
        return self.length

    def __getitem__(self, index: int) -> dict[str, torch.Tensor]:
        if not 0 <= index < self.length:
            raise IndexError(f"index {index} out of range for {self.length} samples")
        rng = np.random.default_rng([self.seed, index])
        frames = self.sequences[int(rng.integers(len(self.sequences)))]
        gap = int(rng.integers(1, min(self.max_gap, len(frames) - 1) + 1))
        first = int(rng.integers(len(frames) - gap))
        pair = [as_tensor(read_image(frames[first])), as_tensor(read_image(frames[first + gap]))]
        if pair[0].shape != pair[1].shape:
            raise UserError(f"image sequences: {frames[first]} and {frames[first + gap]} differ "
                            f"in size ({tuple(pair[0].shape[1:])} vs {tuple(pair[1].shape[1:])})")
        pair = [cover(image, self.crop) for image in pair]
        _, h, w = pair[0].shape
        top, left = int(rng.integers(h - self.crop[0] + 1)), int(rng.integers(w - self.crop[1] + 1))
        pair = [image[:, top:top + self.crop[0], left:left + self.crop[1]] for image in pair]
        if rng.random() < 0.5:
            pair.reverse()
        if rng.random() < 0.5:
            pair = [image.flip(-1) for image in pair]
        return {"img0": pair[0].contiguous(), "img1": pair[1].contiguous()}


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
