"""Coloured point clouds as binary little-endian PLY (the format every 3D viewer opens).

One ``vertex`` element with ``float x, y, z`` and ``uchar red, green, blue``; no faces. The
header is ASCII, the body the packed records (15 bytes per point).
"""

from __future__ import annotations

import numpy as np

from crossview.data.io import PathLike
from crossview.output import atomic_output

VERTEX = np.dtype([("x", "<f4"), ("y", "<f4"), ("z", "<f4"),
                   ("red", "u1"), ("green", "u1"), ("blue", "u1")])


def ply_bytes(points: np.ndarray, colours: np.ndarray) -> bytes:
    """The PLY file of ``points [N, 3]`` (float) coloured ``colours [N, 3]`` (uint8 RGB)."""
    points, colours = np.asarray(points), np.asarray(colours)
    if points.ndim != 2 or points.shape[1] != 3:
        raise ValueError(f"points must be [N, 3], got {points.shape=}")
    if colours.shape != points.shape or colours.dtype != np.uint8:
        raise ValueError(f"colours must be uint8 [N, 3] like points, got {colours.shape=}, "
                         f"{colours.dtype=}")
    records = np.empty(len(points), VERTEX)
    for i, axis in enumerate("xyz"):
        records[axis] = points[:, i]
    for i, channel in enumerate(("red", "green", "blue")):
        records[channel] = colours[:, i]
    header = "\n".join([
        "ply", "format binary_little_endian 1.0", "comment written by crossview",
        f"element vertex {len(points)}",
        *(f"property float {axis}" for axis in "xyz"),
        *(f"property uchar {channel}" for channel in ("red", "green", "blue")),
        "end_header", ""])
    return header.encode("ascii") + records.tobytes()


def write_ply(path: PathLike, points: np.ndarray, colours: np.ndarray) -> None:
    """Write ``points [N, 3]`` with ``colours [N, 3]`` uint8 to ``path`` (see :func:`ply_bytes`)."""
    data = ply_bytes(points, colours)
    with atomic_output(path) as tmp:
        tmp.write_bytes(data)
