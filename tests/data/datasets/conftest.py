from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest

from crossview.data import io

H, W = 6, 8


@pytest.fixture
def rng() -> np.random.Generator:
    return np.random.default_rng(0)


@pytest.fixture
def write_image(rng: np.random.Generator) -> Callable[[Path], np.ndarray]:
    """Write a random RGB image at ``path`` (creating folders); return its pixels."""

    def write(path: Path, size: tuple[int, int] = (H, W)) -> np.ndarray:
        path.parent.mkdir(parents=True, exist_ok=True)
        image = rng.integers(0, 256, (*size, 3), dtype=np.uint8)
        io.write_image(path, image)
        return image

    return write


@pytest.fixture
def write_mask() -> Callable[[Path, np.ndarray], None]:
    """Write a uint8 ``[H, W]`` mask as a single-channel 8-bit PNG."""

    def write(path: Path, mask: np.ndarray) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        io.write_image(path, mask.astype(np.uint8))

    return write


@pytest.fixture
def mkparent() -> Callable[[Path], Path]:
    """Create the parent folders of ``path``; return ``path``."""

    def make(path: Path) -> Path:
        path.parent.mkdir(parents=True, exist_ok=True)
        return path

    return make
