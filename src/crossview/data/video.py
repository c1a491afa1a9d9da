"""Video files as frame sequences, through PyAV (``pip install 'crossview[video]'``; its wheels
bundle FFmpeg, so nothing else is needed).

:func:`open_video` checks that a file decodes (its first frames) before any work starts;
:func:`frames` then streams its frames as ``[H, W, 3]`` uint8 RGB arrays, one at a time, and
warns (logger ``crossview.data.video``) when fewer or more decode than the container declares.
"""

from __future__ import annotations

import importlib
import itertools
import logging
import os
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from crossview.errors import UserError

log = logging.getLogger(__name__)

VIDEO_SUFFIXES = (".mp4", ".m4v", ".mov", ".avi", ".mkv", ".webm", ".mpg", ".mpeg", ".gif")


def is_video(path: str | os.PathLike[str]) -> bool:
    """Whether ``path`` names a video file by its suffix."""
    return Path(path).suffix.lower() in VIDEO_SUFFIXES


def _av() -> object:
    try:
        return importlib.import_module("av")
    except ImportError:
        raise UserError("reading video files needs PyAV, which is not installed: "
                        "pip install 'crossview[video]'") from None


@dataclass(frozen=True)
class VideoInfo:
    """What :func:`open_video` learnt: the path, the frame count the container declares
    (``0`` when it does not say) and the frame size ``(H, W)``."""

    path: Path
    frames: int
    size: tuple[int, int]


def open_video(path: str | os.PathLike[str], min_frames: int = 1,
               purpose: str = "") -> VideoInfo:
    """Check that ``path`` is a video whose first ``min_frames`` frames decode; a
    :class:`UserError` naming the file otherwise (and ``purpose``, why that many are
    needed)."""
    path = Path(path)
    if not path.is_file():
        raise UserError(f"{path}: no such file")
    stream = frames(path)
    try:
        head = list(itertools.islice(stream, min_frames))
    finally:
        stream.close()
    if not head:
        raise UserError(f"{path}: the video holds no frames")
    if len(head) < min_frames:
        raise UserError(f"{path}: the video holds only {len(head)} frame(s), {min_frames} needed"
                        + (f" ({purpose})" if purpose else ""))
    av = _av()
    with av.open(str(path)) as container:
        declared = container.streams.video[0].frames
    return VideoInfo(path, int(declared), head[0].shape[:2])


def frames(path: str | os.PathLike[str]) -> Iterator[np.ndarray]:
    """The frames of the first video stream of ``path`` in order, each ``[H, W, 3]`` uint8
    RGB; a file that does not decode (at the start or later) is a :class:`UserError` naming
    it. Read to the end, a count that differs from the container's declared one (a truncated
    file whose index still counts the lost frames) is one logged warning."""
    av = _av()
    try:
        with av.open(str(path)) as container:
            if not container.streams.video:
                raise UserError(f"{path}: cannot decode video (no video stream)")
            declared = container.streams.video[0].frames  # 0: the container does not say
            decoded = 0
            for frame in container.decode(video=0):
                decoded += 1
                yield frame.to_ndarray(format="rgb24")
            if declared and decoded != declared:
                log.warning(f"{path}: the container declares {declared} frames but {decoded} "
                            "decoded (a truncated or damaged file?); used the decoded ones")
    except av.FFmpegError as error:
        raise UserError(f"{path}: cannot decode video ({error})") from None
