"""``--save-video`` of ``crossview flow`` and ``crossview stereo``: where the video of a run's
results goes and at what rate (:func:`video_plan`, checked before the model loads), and its
writing once every pair's files are there (:func:`write_result_video`: a progress line, and
Ctrl-C leaves no video and exits with code 130)."""

from __future__ import annotations

from collections.abc import Callable
from fractions import Fraction
from pathlib import Path

import typer

from crossview.cli.batch import INTERRUPTED_EXIT
from crossview.console import stderr, stdout
from crossview.lazy import lazy_import
from crossview.output import check_output_file

api = lazy_import("crossview.api")
steps = lazy_import("crossview.long_step")  # its progress bar (rich.progress) loads when used

FOLDER_RATE = Fraction(10)  # frames per second of the video of a folder of frames


def video_plan(source: str, out_dir: Path, stride: int, kind: str) -> tuple[Path, Fraction]:
    """``(path, rate)`` of the ``--save-video`` video of ``source`` (a video file or a folder
    of frames): ``OUT/STEM_KIND.mp4`` (STEM: the video's stem or the folder's name), checked
    writable, at the source's frame rate over ``stride`` (a folder, or a video that gives no
    rate: :data:`FOLDER_RATE`); a :class:`UserError` without PyAV, before the model loads."""
    api.require_video_writer()
    path = Path(source)
    rate = api.open_video(path).rate if api.is_video(path) else None
    video = out_dir / f"{path.resolve().name if path.is_dir() else path.stem}_{kind}.mp4"
    check_output_file(video, "--save-video")
    return video, (rate or FOLDER_RATE) / stride


def write_result_video(video: Path, frames: int, rate: Fraction, what: str,
                       encode: Callable[[Callable[[], None]], str]) -> None:
    """Write the ``what`` video ``video`` of ``frames`` frames by ``encode(on_frame)``, which
    returns what the closing line says of its colours; Ctrl-C meanwhile leaves none and exits
    with code 130."""
    try:
        with steps.long_step(f"writing the {what} video {video} ({frames} frames)",
                             total=frames, after=3.0) as advance:
            colours = encode(lambda: advance(1))
    except KeyboardInterrupt:
        stderr.print(f"error: interrupted: {video} not written", markup=False, soft_wrap=True)
        raise typer.Exit(INTERRUPTED_EXIT) from None
    stdout.print(f"wrote {video} ({frames} frames at {float(rate):g} per second; {colours})",
                 markup=False, soft_wrap=True)
