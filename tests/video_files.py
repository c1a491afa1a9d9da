"""Writing small test videos with PyAV (the library crossview reads them with)."""

from __future__ import annotations

import struct
from pathlib import Path

import numpy as np
import pytest


def write_lossless_video(path: Path, frames: list[np.ndarray]) -> None:
    """A lossless (FFV1, RGB) video of ``frames`` ``[H, W, 3]`` uint8; skips the test when
    PyAV is not installed."""
    av = pytest.importorskip("av")
    with av.open(str(path), "w") as container:
        stream = container.add_stream("ffv1", rate=5)
        stream.width, stream.height, stream.pix_fmt = frames[0].shape[1], frames[0].shape[0], "bgr0"
        for frame in frames:
            container.mux(stream.encode(av.VideoFrame.from_ndarray(frame, format="rgb24")))
        container.mux(stream.encode())


def declare_frames(avi: Path, count: int) -> None:
    """Make the AVI file ``avi`` (as :func:`write_lossless_video` writes it) declare ``count``
    frames in its stream header (``strh``'s ``dwLength``, what FFmpeg reports), whatever it
    holds: a file whose index promises frames that never decode."""
    data = bytearray(avi.read_bytes())
    header = data.find(b"strh")
    assert header >= 0, f"{avi}: no AVI stream header"
    # strh payload: fccType, fccHandler, flags, priority + language, initial frames, scale,
    # rate, start, then the length at byte 32
    struct.pack_into("<I", data, header + 8 + 32, count)
    avi.write_bytes(bytes(data))
