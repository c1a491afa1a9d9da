"""A flow video from the flow files a run saved: one colour-wheel frame per file, in order.

:func:`write_flow_video` reads the files twice, one at a time (a sequence's flows need not fit
in memory together): first for the colour scale, the largest flow magnitude over all of them,
so that one colour means one motion in every frame (each pair's own ``_flow_color.png`` is
scaled to that pair's largest magnitude); then to draw them
(:func:`crossview.viz.flow_to_colour`) and encode them (:func:`crossview.data.video.write_video`).
Reading the saved files, not the results in memory, lets a run resumed with
``--skip-existing`` draw the pairs that an earlier run wrote.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator, Sequence
from fractions import Fraction
from pathlib import Path

import numpy as np

from crossview.data import io
from crossview.data.video import write_video
from crossview.errors import UserError
from crossview.viz import flow_to_colour

# flow file suffix -> reader giving [H, W, 2] (x, y) px
_READERS: dict[str, Callable[[Path], np.ndarray]] = {
    ".flo": io.read_flo,
    ".pfm": lambda path: io.read_pfm(path)[..., :2],  # (u, v, 0)
    ".npy": io.read_npy,
    ".png": lambda path: io.read_kitti_flow(path)[0],
}


def read_flow(path: str | os.PathLike[str]) -> np.ndarray:
    """The flow ``[H, W, 2]`` (x, y px) of a ``.flo``, ``.pfm`` (u, v, 0), ``.npy`` or KITTI
    flow ``.png`` file, as ``crossview flow --format`` writes them; a :class:`UserError` naming
    the file for another suffix or content."""
    path = Path(path)
    reader = _READERS.get(path.suffix.lower())
    if reader is None:
        raise UserError(f"{path}: not a flow file (known: {', '.join(_READERS)})")
    flow = reader(path)
    if flow.ndim != 3 or flow.shape[2] != 2:
        raise UserError(f"{path}: a flow is [H, W, 2], got {flow.shape}")
    return flow


def _largest_magnitude(flow: np.ndarray) -> float:
    return float(np.hypot(*np.nan_to_num(flow).transpose(2, 0, 1)).max())


def write_flow_video(path: str | os.PathLike[str], flow_files: Sequence[str | os.PathLike[str]],
                     rate: Fraction, on_frame: Callable[[], None] | None = None) -> float:
    """Write the flows of ``flow_files`` (see :func:`read_flow`), in order, as an MP4 video at
    ``path`` of ``rate`` frames per second, one frame ``[H, W, 3]`` per file on the standard
    colour wheel with one scale for all; returns that scale (px: the largest magnitude, which
    is full saturation). Published only once complete (:func:`~crossview.data.video.write_video`:
    an error or Ctrl-C leaves no video). Files of different sizes are a :class:`UserError`;
    ``on_frame()`` is called after each frame."""
    if not flow_files:
        raise UserError(f"{path}: a flow video needs at least one flow file")
    scale = max(max(_largest_magnitude(read_flow(f)) for f in flow_files), 1e-9)
    sizes: set[tuple[int, ...]] = set()

    def colours() -> Iterator[np.ndarray]:
        for file in flow_files:
            flow = read_flow(file)
            sizes.add(flow.shape)
            if len(sizes) > 1:
                raise UserError(f"{file}: its flow is {flow.shape[1]}x{flow.shape[0]} (W x H), "
                                "another's is not; a video's frames have one size")
            yield flow_to_colour(flow, max_flow=scale)

    write_video(path, colours(), rate, on_frame)
    return scale
