"""Writing small test videos with PyAV (the library crossview reads them with)."""

from __future__ import annotations

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
