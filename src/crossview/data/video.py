"""Video files as frame sequences, through PyAV (``pip install 'crossview[video]'``; its wheels
bundle FFmpeg, so nothing else is needed).

:func:`open_video` checks that a file decodes (its first frames) before any work starts;
:func:`frames` then streams its frames as ``[H, W, 3]`` uint8 RGB arrays, one at a time, and
warns (logger ``crossview.data.video``) when fewer or more decode than the container declares.
:func:`write_video` encodes frames as an H.264 MP4 file, published only once complete.
"""

from __future__ import annotations

import importlib
import itertools
import logging
import os
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from fractions import Fraction
from pathlib import Path

import numpy as np

from crossview.errors import UserError
from crossview.output import atomic_output

log = logging.getLogger(__name__)

VIDEO_SUFFIXES = (".mp4", ".m4v", ".mov", ".avi", ".mkv", ".webm", ".mpg", ".mpeg", ".gif")


def is_video(path: str | os.PathLike[str]) -> bool:
    """Whether ``path`` names a video file by its suffix."""
    return Path(path).suffix.lower() in VIDEO_SUFFIXES


def _av(purpose: str = "reading") -> object:
    try:
        return importlib.import_module("av")
    except ImportError:
        raise UserError(f"{purpose} video files needs PyAV, which is not installed: "
                        "pip install 'crossview[video]'") from None


def require_video_writer() -> None:
    """A :class:`UserError` naming the extra to install unless PyAV, which
    :func:`write_video` needs, is there (checked before a run whose end writes a video)."""
    _av("writing")


@dataclass(frozen=True)
class VideoInfo:
    """What :func:`open_video` learnt: the path, the frame count the container declares
    (``0`` when it does not say), the frame size ``(H, W)`` and the average frame rate in
    frames per second (``None`` when the container does not say)."""

    path: Path
    frames: int
    size: tuple[int, int]
    rate: Fraction | None = None


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
        stream = container.streams.video[0]
        declared, rate = stream.frames, stream.average_rate
    return VideoInfo(path, int(declared), head[0].shape[:2], Fraction(rate) if rate else None)


def count_frames(path: str | os.PathLike[str]) -> int:
    """The frames of the first video stream of ``path`` as the container declares them, else
    counted from its packets (read, not decoded: fast); a file that does not read is a
    :class:`UserError` naming it."""
    av = _av()
    try:
        with av.open(str(path)) as container:
            stream = container.streams.video[0]
            if stream.frames:
                return int(stream.frames)
            return sum(1 for packet in container.demux(stream) if packet.size)
    except av.FFmpegError as error:
        raise UserError(f"{path}: cannot read video ({error})") from None


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


def write_video(path: str | os.PathLike[str], images: Iterable[np.ndarray], rate: Fraction,
                on_frame: Callable[[], None] | None = None) -> int:
    """Encode ``images`` (each ``[H, W, 3]`` uint8 RGB, all of one size) at ``rate`` frames per
    second as an H.264 MP4 file (yuv420p at quality 18, which every player shows; one encoder
    thread, so that the bytes depend on the frames alone) at ``path``;
    returns the number of frames. The file is published only once complete (written under a
    temporary name, then renamed): an error or Ctrl-C meanwhile leaves ``path`` as it was.
    yuv420p needs even sides: an odd height or width gets one more row or column, a copy of
    the last. ``on_frame()`` is called after each frame is encoded. No frames, or frames of
    another size or type than the first, are a ``ValueError``."""
    av = _av("writing")
    if rate <= 0:
        raise ValueError(f"a video's frame rate must be positive, got {rate=}")
    count = 0
    with atomic_output(path) as staged, av.open(str(staged), "w", format="mp4") as container:
        stream = None
        for image in images:
            if stream is None:
                shape = image.shape
                if image.dtype != np.uint8 or image.ndim != 3 or shape[2] != 3:
                    raise ValueError(f"video frames must be [H, W, 3] uint8, got {image.shape=} "
                                     f"{image.dtype}")
                stream = container.add_stream("libx264", rate=Fraction(rate))
                stream.height, stream.width = (side + side % 2 for side in shape[:2])
                stream.pix_fmt, stream.options = "yuv420p", {"crf": "18"}
                # one encoder thread: the same frames give the same bytes on any machine or load
                stream.codec_context.thread_count = 1
            elif image.shape != shape or image.dtype != np.uint8:
                raise ValueError(f"frame {count} is {image.shape} {image.dtype}, the first was "
                                 f"{shape} uint8: a video's frames have one size")
            even = np.pad(image, ((0, shape[0] % 2), (0, shape[1] % 2), (0, 0)), mode="edge")
            container.mux(stream.encode(av.VideoFrame.from_ndarray(even, format="rgb24")))
            count += 1
            if on_frame is not None:
                on_frame()
        if stream is None:
            raise ValueError("a video needs at least one frame, got none")
        container.mux(stream.encode())
    return count
