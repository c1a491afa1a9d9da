"""The frames of a stereo video run: two videos, one side-by-side video (or folder of
side-by-side frames), or two folders of frames, each picked frame one pair.

:func:`stereo_jobs` finds them for ``crossview stereo`` (:func:`crossview.cli.dense.run_dense`
runs them): a video's frames are named ``STEM_000012`` by their index (STEM: the left or the
side-by-side video's stem), a folder's by the left file's stem
(:func:`crossview.cli.dense.output_names`). ``--start``, ``--stop``, ``--stride`` pick the
frames as for ``crossview flow`` (:class:`crossview.cli.dense.FrameRange`), each picked frame
being one pair. Everything that can be told before the model loads is a :class:`UserError`
then (videos of different frame sizes or declared counts, a side-by-side video of odd width,
an empty folder, a range past the end); a frame that turns out bad later (an unreadable file,
a pair of two sizes) fails that pair only, and a video that stops decoding, or ends before the
other, ends the run there (:mod:`crossview.cli.batch`).
"""

from __future__ import annotations

import functools
import itertools
from collections.abc import Iterator
from pathlib import Path

from crossview.cli.batch import PairJob
from crossview.cli.dense import FrameRange, _images_in, find_pairs, output_names, read_pair
from crossview.errors import UserError
from crossview.lazy import lazy_import

api = lazy_import("crossview.api")
np = lazy_import("numpy")  # loaded when frames are read: `crossview stereo --help` needs none

Jobs = tuple[list[PairJob] | Iterator[PairJob], int, bool]


def stereo_frame_range(start: int | None, stop: int | None, stride: int | None
                       ) -> FrameRange | None:
    """The :class:`FrameRange` of the options (``None``: none given), one frame a pair."""
    if start is None and stop is None and stride is None:
        return None
    return FrameRange(0 if start is None else start, stop, 1 if stride is None else stride,
                      need=1, what="a stereo run")


def is_sequence(left: str, right: str | None, side_by_side: bool) -> bool:
    """Whether the inputs are a stereo sequence (videos, or side-by-side frames) rather than
    pairs of image files, directories or patterns."""
    return side_by_side or right is None or api.is_video(left) or (
        right is not None and api.is_video(right))


def split_side_by_side(frame: np.ndarray, source: object) -> tuple[np.ndarray, np.ndarray]:
    """The left and right halves ``[H, W/2, 3]`` of a side-by-side frame ``[H, W, 3]``; a
    :class:`UserError` naming ``source`` for an odd width."""
    w = frame.shape[1]
    if w % 2:
        raise UserError(f"{source}: a side-by-side frame needs an even width (left half = left "
                        f"view), got {w} px")
    return frame[:, : w // 2], frame[:, w // 2:]


def stereo_jobs(left: str, right: str | None, frames: FrameRange | None,
                side_by_side: bool) -> Jobs:
    """The pairs of a stereo run as ``(jobs, count, single)`` (see the module docstring):
    sequences here, pairs of files, directories or patterns as
    :func:`crossview.cli.dense.find_jobs` finds them, picked by ``frames``."""
    if side_by_side:
        if right is not None:
            raise UserError("--side-by-side takes one video file or one folder of side-by-side "
                            f"frames, not two inputs (got {left!r} and {right!r})")
        return _side_by_side(Path(left), frames or FrameRange(need=1, what="a stereo run"))
    if right is None:
        raise UserError("give two images, directories, patterns or videos (or one side-by-side "
                        f"video or folder of frames with --side-by-side), got {left!r} alone")
    if api.is_video(left) != api.is_video(right):
        raise UserError(f"give two videos (left and right views), got {left!r} and {right!r}")
    picks = frames or FrameRange(need=1, what="a stereo run")
    if api.is_video(left):
        return _two_videos(Path(left), Path(right), picks)
    if frames is not None and not (Path(left).is_dir() and Path(right).is_dir()):
        raise UserError(f"{frames} needs videos or folders of frames, not two files or "
                        "patterns")
    pairs = find_pairs(left, right)
    named = [(name, pair) for i, (name, pair) in enumerate(zip(output_names(pairs), pairs,
                                                               strict=True)) if picks.picks(i)]
    if not named:
        raise picks.too_few(f"{left} and {right}", len(pairs))
    jobs = [PairJob(name, f"{a} and {b}", functools.partial(read_pair, a, b))
            for name, (a, b) in named]
    return jobs, len(jobs), len(jobs) == 1 and Path(left).is_file()


def _count(total: int, frames: FrameRange) -> int:
    """How many frames ``frames`` picks of ``total`` (0: unknown)."""
    return len(range(frames.start, total if frames.stop is None else min(frames.stop, total),
                     frames.stride))


def _picked(stream: Iterator, frames: FrameRange, source: object) -> Iterator[tuple[int, object]]:
    """``(index, item)`` of the items of ``stream`` that ``frames`` picks; a
    :class:`UserError` when it ends before the first picked one."""
    total = 0
    for index, item in enumerate(stream):
        total = index + 1
        if frames.stop is not None and index >= frames.stop:
            return
        if frames.picks(index):
            yield index, item
    if total <= frames.start:
        raise frames.too_few(source, total)


def _head_first(jobs: Iterator[PairJob]) -> Iterator[PairJob]:
    """``jobs`` with the first decoded now: a range past the end fails before the model
    loads."""
    head = next(jobs)
    return itertools.chain([head], jobs)


def _two_videos(left: Path, right: Path, frames: FrameRange) -> Jobs:
    first, second = api.open_video(left), api.open_video(right)
    if first.size != second.size:
        (h0, w0), (h1, w1) = first.size, second.size
        raise UserError(f"{left} is {w0}x{h0} but {right} is {w1}x{h1} (W x H); the two views "
                        "need one size")
    counts = api.count_video_frames(left), api.count_video_frames(right)
    if counts[0] != counts[1]:
        raise UserError(f"{left} holds {counts[0]} frames but {right} holds {counts[1]}; the "
                        "two views need one frame each")

    def jobs() -> Iterator[PairJob]:
        lefts, rights = api.video_frames(left), api.video_frames(right)
        for index, frame in _picked(itertools.zip_longest(lefts, rights), frames, left):
            a, b = frame
            if a is None or b is None:
                short = left if a is None else right
                raise UserError(f"{short} ends at frame {index}, the other video goes on; the "
                                "two views need one frame each")
            yield PairJob(f"{left.stem}_{index:06d}", f"{left} and {right} frame {index}",
                          functools.partial(tuple, (a, b)))

    return _head_first(jobs()), _count(counts[0], frames), False


def _side_by_side(source: Path, frames: FrameRange) -> Jobs:
    if api.is_video(source):
        info = api.open_video(source)
        if info.size[1] % 2:
            raise UserError(f"{source}: a side-by-side video needs an even width (left half = "
                            f"left view), got {info.size[1]} px")

        def jobs() -> Iterator[PairJob]:
            for index, frame in _picked(api.video_frames(source), frames, source):
                yield PairJob(f"{source.stem}_{index:06d}", f"{source} frame {index}",
                              functools.partial(split_side_by_side, frame, source))

        return _head_first(jobs()), _count(info.frames, frames), False
    if not source.is_dir():
        raise UserError(f"--side-by-side takes a video file or a folder of side-by-side frames, "
                        f"got {source}")
    images = _images_in(source)
    picked = [p for i, p in enumerate(images) if frames.picks(i)]
    if not picked:
        raise frames.too_few(source, len(images))

    def load(path: Path) -> tuple[np.ndarray, np.ndarray]:
        return split_side_by_side(api.read_image(path), path)

    jobs = [PairJob(path.stem, str(path), functools.partial(load, path)) for path in picked]
    return jobs, len(jobs), False
