"""A disparity (or depth) video from the files a stereo run saved: one coloured frame per file,
in order, one colour range for all.

:func:`write_disparity_video` reads the files twice, one at a time (as
:func:`crossview.data.flow_video.write_flow_video` does, so that a resumed run's frames are in
it and a sequence need not fit in memory): first for the range, the lowest 1st and the highest
99th percentile over the frames, so that one colour means one disparity (or depth) in every
frame; then to draw them (turbo; depth near red and far blue with the pixels without depth
black, as ``NAME_depth_color.png``) with a colour bar, and encode them
(:func:`crossview.data.video.write_video`).
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable, Iterator, Sequence
from fractions import Fraction
from pathlib import Path

import numpy as np

from crossview.data import io
from crossview.data.video import write_video
from crossview.errors import UserError
from crossview.viz import disparity_to_colour

MILLIMETRES = 1000.0  # a 16-bit depth PNG holds millimetres, 0 = no depth


def _png(path: Path, depth: bool) -> np.ndarray:
    if depth:
        millimetres = io.read_png16(path).astype(np.float64)
        return np.where(millimetres > 0, millimetres / MILLIMETRES, np.nan)
    disparity, valid = io.read_kitti_disparity(path)
    return np.where(valid, disparity, np.nan)


def read_map(path: str | os.PathLike[str], depth: bool = False) -> np.ndarray:
    """The disparity (px) or, with ``depth``, the depth (metres; NaN = none) ``[H, W]`` of a
    ``.pfm``, ``.npy`` or 16-bit ``.png`` file as ``crossview stereo`` writes them
    (``--format`` / ``--depth-format``); a :class:`UserError` naming the file otherwise."""
    path = Path(path)
    suffix = path.suffix.lower()
    if suffix == ".pfm":
        values = io.read_pfm(path)
    elif suffix == ".npy":
        values = io.read_npy(path)
    elif suffix == ".png":
        values = _png(path, depth)
    else:
        raise UserError(f"{path}: not a disparity or depth file (known: .pfm, .npy, .png)")
    if values.ndim != 2:
        raise UserError(f"{path}: a disparity or depth map is [H, W], got {values.shape}")
    return values.astype(np.float64)


def _range(values: np.ndarray) -> tuple[float, float] | None:
    finite = values[np.isfinite(values)]
    if not finite.size:
        return None
    return float(np.percentile(finite, 1)), float(np.percentile(finite, 99))


def colour_range(maps: Iterable[np.ndarray]) -> tuple[float, float]:
    """``(low, high)``: the lowest 1st and the highest 99th percentile of the finite values of
    ``maps`` (each ``[H, W]``); ``(0, 1)`` when none is finite."""
    ranges = [r for r in map(_range, maps) if r is not None]
    low = min((r[0] for r in ranges), default=0.0)
    return low, max(max((r[1] for r in ranges), default=1.0), low + 1e-6)


def colour_frame(values: np.ndarray, low: float, high: float, depth: bool) -> np.ndarray:
    """``[H, W + bar, 3]`` uint8: ``values`` ``[H, W]`` through turbo on ``low..high`` with a
    colour bar; depth reversed (near red) and its pixels without depth (NaN) black."""
    picture = disparity_to_colour(values, vmin=low, vmax=high,
                                  cmap="turbo_r" if depth else "turbo")
    if depth:
        picture = picture.copy()
        picture[:, :values.shape[1]][~np.isfinite(values)] = 0
    return picture


def write_disparity_video(path: str | os.PathLike[str], files: Sequence[str | os.PathLike[str]],
                          rate: Fraction, *, depth: bool = False,
                          on_frame: Callable[[], None] | None = None) -> tuple[float, float]:
    """Write the maps of ``files`` (see :func:`read_map`), in order, as an MP4 video at ``path``
    of ``rate`` frames per second, one frame per file coloured on one range for all (see the
    module docstring); returns that range ``(low, high)`` (px, or metres with ``depth``).
    Published only once complete (an error or Ctrl-C leaves no video). Files of different
    sizes are a :class:`UserError`; ``on_frame()`` is called after each frame."""
    if not files:
        raise UserError(f"{path}: a disparity video needs at least one file")
    low, high = colour_range([read_map(f, depth) for f in files])
    sizes: set[tuple[int, ...]] = set()

    def pictures() -> Iterator[np.ndarray]:
        for file in files:
            values = read_map(file, depth)
            sizes.add(values.shape)
            if len(sizes) > 1:
                raise UserError(f"{file}: its map is {values.shape[1]}x{values.shape[0]} (W x H), "
                                "another's is not; a video's frames have one size")
            yield colour_frame(values, low, high, depth)

    write_video(path, pictures(), rate, on_frame)
    return low, high
