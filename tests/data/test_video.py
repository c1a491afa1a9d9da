"""Video frames through PyAV: a lossless file reads back bit for bit; what is not a video is
one :class:`UserError` naming the file."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from crossview.data import video
from crossview.errors import UserError
from video_files import write_lossless_video

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
