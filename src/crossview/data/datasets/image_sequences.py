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

import torch

from crossview.data.datasets.crop_stream import CropStream, as_tensor, cover
from crossview.data.io import IMAGE_SUFFIXES, read_image
from crossview.errors import UserError


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


class ImageSequencePairs(CropStream):
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
        if max_gap < 1:
            raise ValueError(f"max_gap must be positive, got {max_gap=}")
        super().__init__(length, crop, seed)
        self.sequences = find_sequences(root)
        self.max_gap = max_gap

    def __getitem__(self, index: int) -> dict[str, torch.Tensor]:
        rng = self.generator(index)
        frames = self.sequences[int(rng.integers(len(self.sequences)))]
        gap = int(rng.integers(1, min(self.max_gap, len(frames) - 1) + 1))
        first = int(rng.integers(len(frames) - gap))
        pair = [as_tensor(read_image(frames[first])), as_tensor(read_image(frames[first + gap]))]
        if pair[0].shape != pair[1].shape:
            raise UserError(f"image sequences: {frames[first]} and {frames[first + gap]} differ "
                            f"in size ({tuple(pair[0].shape[1:])} vs {tuple(pair[1].shape[1:])})")
        pair = [cover(image, self.crop) for image in pair]
        window = self.crop_window(rng, pair[0].shape)
        pair = [image[window] for image in pair]
        if rng.random() < 0.5:
            pair.reverse()
        if rng.random() < 0.5:
            pair = [image.flip(-1) for image in pair]
        return {"img0": pair[0].contiguous(), "img1": pair[1].contiguous()}
