"""Unlabelled real stereo pairs, for self-supervised stereo training (the photometric term of
:mod:`crossview.train.photometric` with ``task: stereo``).

``root`` holds one folder per rectified pair, in the layout of ``crossview eval
--dataset scenes:`` (a ground truth beside them is not read)::

    ROOT/bedroom_chair/left.png, right.png
    ROOT/rocks2/left.png, right.png

Sample ``i`` is a pure function of ``(seed, i)``: it picks a pair uniformly, one random crop of
``crop`` at the same place in both images (images smaller than the crop are first enlarged
to cover it), and with probability 0.5 the mirrored pair ``(flip(right), flip(left))``: a
rectified pair again, with the same positive disparities (a horizontal flip of one pair, or a
swap of its views, would not be). Images are read when a sample needs them, never cached.

Samples: ``img0`` (left), ``img1`` (right) ``float32 [3, h, w]`` in 0..255, no labels. A root
without a pair, or a pair whose images cannot be read or differ in size, is a
:class:`~crossview.errors.UserError` naming the folder or the files.
"""

from __future__ import annotations

from pathlib import Path

import torch

from crossview.data.datasets.crop_stream import CropStream, as_tensor, cover
from crossview.data.io import IMAGE_SUFFIXES, read_image
from crossview.errors import UserError


def _view(folder: Path, name: str) -> Path | None:
    found = [p for p in sorted(folder.glob(f"{name}.*")) if p.suffix.lower() in IMAGE_SUFFIXES]
    return found[0] if found else None


def find_stereo_pairs(root: str | Path) -> list[tuple[Path, Path]]:
    """``(left, right)`` of every sub-folder of ``root`` (sorted by name) that holds a
    ``left.*`` and a ``right.*`` image."""
    root = Path(root)
    if not root.is_dir():
        raise UserError(f"stereo pairs: {root} is not a folder")
    pairs = []
    for folder in sorted(p for p in root.iterdir() if p.is_dir()):
        left, right = _view(folder, "left"), _view(folder, "right")
        if left is not None and right is not None:
            pairs.append((left, right))
    if not pairs:
        raise UserError(f"stereo pairs: no folder under {root} holds a left and a right image "
                        f"(left.png and right.png, or another of {', '.join(IMAGE_SUFFIXES)})")
    return pairs


class UnlabelledStereoPairs(CropStream):
    """Random crops of the pairs of :func:`find_stereo_pairs`, ``length`` samples.

    Args:
        root: the folder of pair folders.
        length: number of samples (the stream is unlimited; this is the epoch).
        crop: ``(h, w)`` of every sample.
        seed: the stream's seed.
    """

    def __init__(self, root: str | Path, length: int, crop: tuple[int, int], *,
                 seed: int = 0) -> None:
        super().__init__(length, crop, seed)
        self.pairs = find_stereo_pairs(root)

    def __getitem__(self, index: int) -> dict[str, torch.Tensor]:
        rng = self.generator(index)
        left_path, right_path = self.pairs[int(rng.integers(len(self.pairs)))]
        left, right = as_tensor(read_image(left_path)), as_tensor(read_image(right_path))
        if left.shape != right.shape:
            raise UserError(f"stereo pairs: {left_path} and {right_path} differ in size "
                            f"({tuple(left.shape[1:])} vs {tuple(right.shape[1:])})")
        left, right = cover(left, self.crop), cover(right, self.crop)
        window = self.crop_window(rng, left.shape)
        left, right = left[window], right[window]
        if rng.random() < 0.5:
            left, right = right.flip(-1), left.flip(-1)
        return {"img0": left.contiguous(), "img1": right.contiguous()}
