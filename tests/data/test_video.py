"""Video frames through PyAV: a lossless file reads back bit for bit; what is not a video is
one :class:`UserError` naming the file; too few frames for the caller is one too, and fewer
frames than the container declares one warning. Written videos are published whole or not at
all."""

from __future__ import annotations

from fractions import Fraction
from pathlib import Path

import numpy as np
import pytest

from crossview.data import video
from crossview.errors import UserError
from video_files import declare_frames, write_lossless_video

pytest.importorskip("av")


def test_frames_read_back_exactly(tmp_path: Path) -> None:
    rng = np.random.default_rng(0)
    frames = [rng.integers(0, 256, (48, 80, 3), dtype=np.uint8) for _ in range(4)]
    write_lossless_video(tmp_path / "v.mkv", frames)
    info = video.open_video(tmp_path / "v.mkv")
    assert info.size == (48, 80) and info.path == tmp_path / "v.mkv"
    got = list(video.frames(tmp_path / "v.mkv"))
    assert len(got) == 4
    for have, want in zip(got, frames, strict=True):
        assert have.dtype == np.uint8 and have.shape == (48, 80, 3)
        np.testing.assert_array_equal(have, want)


@pytest.mark.parametrize("content,message", [
    (b"\x1a\x45\xdf\xa3 truncated matroska", "cannot decode video"),
    (b"", "cannot decode video"),
    (None, "no such file"),
])
def test_what_is_not_a_video_is_one_user_error(tmp_path: Path, content: bytes | None,
                                               message: str) -> None:
    path = tmp_path / "clip.mkv"
    if content is not None:
        path.write_bytes(content)
    with pytest.raises(UserError, match=message) as error:
        video.open_video(path)
    assert str(path) in str(error.value)


def test_suffixes_tell_videos() -> None:
    assert video.is_video("a/b.MP4") and video.is_video("c.mkv") and not video.is_video("d.png")


def _clip(path: Path, count: int) -> list[np.ndarray]:
    rng = np.random.default_rng(1)
    frames = [rng.integers(0, 256, (32, 48, 3), dtype=np.uint8) for _ in range(count)]
    write_lossless_video(path, frames)
    return frames


@pytest.mark.parametrize("count,min_frames", [(1, 2), (2, 3)])
def test_too_few_frames_for_the_caller_is_one_user_error(tmp_path: Path, count: int,
                                                         min_frames: int) -> None:
    path = tmp_path / "clip.mkv"
    _clip(path, count)
    with pytest.raises(UserError) as error:
        video.open_video(path, min_frames=min_frames, purpose="pairs")
    assert str(error.value) == (f"{path}: the video holds only {count} frame(s), {min_frames} "
                                "needed (pairs)")
    assert video.open_video(path, min_frames=count).size == (32, 48)


def test_fewer_frames_than_declared_is_one_warning_and_every_decoded_frame(
        tmp_path: Path, log_lines) -> None:
    path = tmp_path / "clip.avi"
    frames = _clip(path, 3)
    assert list(video.frames(path)) and log_lines() == ""  # as declared: no word
    declare_frames(path, 5)
    assert video.open_video(path).frames == 5 and log_lines() == ""  # the start says nothing
    got = list(video.frames(path))
    assert len(got) == 3 and all((a == b).all() for a, b in zip(got, frames, strict=True))
    assert log_lines() == (f"warning: {path}: the container declares 5 frames but 3 decoded (a "
                           "truncated or damaged file?); used the decoded ones\n")


def test_a_written_video_reads_back_with_its_frames_and_rate(tmp_path: Path) -> None:
    """A smooth picture (H.264 at yuv420p keeps colour at half resolution) of odd sides."""
    rows, cols = np.mgrid[0:33, 0:47]
    first = np.stack([rows * 6, cols * 4, 200 - rows * 2 - cols * 2], axis=2)
    frames = [(first + 20 * i).astype(np.uint8) for i in range(3)]
    assert video.write_video(tmp_path / "v.mp4", iter(frames), Fraction(25, 2)) == 3
    info = video.open_video(tmp_path / "v.mp4")
    assert info.rate == Fraction(25, 2) and info.size == (34, 48)  # odd sides: one more
    got = list(video.frames(tmp_path / "v.mp4"))
    assert len(got) == 3
    for have, want in zip(got, frames, strict=True):
        assert np.abs(have[:33, :47].astype(float) - want).mean() < 3  # lossy


@pytest.mark.parametrize("frames,message", [
    ([], "at least one frame"),
    ([np.zeros((32, 32, 3), np.uint8), np.zeros((32, 34, 3), np.uint8)], "one size"),
    ([np.zeros((32, 32), np.uint8)], r"\[H, W, 3\] uint8"),
])
def test_a_video_that_cannot_be_written_leaves_no_file(tmp_path: Path, frames: list[np.ndarray],
                                                      message: str) -> None:
    with pytest.raises(ValueError, match=message):
        video.write_video(tmp_path / "v.mp4", frames, Fraction(10))
    assert list(tmp_path.iterdir()) == []
