"""Tiny real-layout stereo scene folders (``SCENE/left.png, right.png, gt.npy``: the layout of
:mod:`crossview.data.datasets.scenes`) for the tests of real-scene training."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from crossview.data import io


def write_real_scenes(root: Path, count: int = 3, size: tuple[int, int] = (64, 96)) -> Path:
    """``count`` scenes ``s0``, ``s1``, ... of ``size`` (H, W) px in ``root``: random left
    images, the right ones shifted by ``2 + i`` px, ground truth ``2 + i`` everywhere."""
    rng = np.random.default_rng(0)
    for i in range(count):
        folder = root / f"s{i}"
        folder.mkdir(parents=True)
        left = rng.integers(0, 256, (*size, 3), dtype=np.uint8)
        io.write_image(folder / "left.png", left)
        io.write_image(folder / "right.png", np.roll(left, -2 - i, axis=1))
        io.write_npy(folder / "gt.npy", np.full(size, 2.0 + i, np.float32))
    return root
