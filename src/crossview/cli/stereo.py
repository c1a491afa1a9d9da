"""``crossview stereo LEFT RIGHT``: disparity of rectified stereo pairs with MatchStereo.

Writes per pair into ``-o DIR`` (NAME = the left file's stem): ``NAME_disp.{pfm,png,npy}``
(raw disparity, px), ``NAME_disp_color.png`` (colourised, with a colour bar),
``NAME_disp_noc.png`` (left-right consistency mask, 255 = consistent); with ``--save-right``
the same for the right view (``NAME_disp_right*``), with ``--save-rpos`` the self relative
positions as ``NAME_disp_rpos.png``, with ``--save-confidence`` the confidence
(:mod:`crossview.cli.confidence_output`), with a calibration metric depth and a point cloud
(:mod:`crossview.cli.depth_output`). Many pairs are written pair by pair
(:mod:`crossview.cli.batch`). With ``--rectify`` one pair of photographs taken by hand is
rectified from its own matches first (:mod:`crossview.cli.rectified_stereo`).

Stereo video (:mod:`crossview.cli.stereo_frames`): two videos (left and right views), one
side-by-side video or folder of side-by-side frames with ``--side-by-side`` (left half = left
view), or two folders of frames; each frame is one pair, a video's named ``STEM_000012`` by its
index, ``--start``, ``--stop``, ``--stride`` choose the frames as for ``crossview flow``. A
video's frames are warm-started (each frame's network starts from the previous frame's
disparity: ``--warm-start`` / ``--cold-start``; folders start cold unless ``--warm-start``).
With ``--save-video``, ``STEM_disp.mp4`` (or ``STEM_depth.mp4`` with a calibration) shows the
frames' disparity (depth) in order, on one colour range, once every frame's files are there
(:mod:`crossview.data.disparity_video`; published whole or not at all, as flow's).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from fractions import Fraction
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from crossview.cli import depth_output as depth
from crossview.cli import options
from crossview.cli.confidence_output import ConfidenceOutput, SaveConfidence
from crossview.cli.dense import (
    DenseOptions,
    ExtraOutput,
    FrameRange,
    ViewTensors,
    raw_suffix,
    run_dense,
)
from crossview.cli.rectified_stereo import stereo_on_rectified
from crossview.cli.result_video import video_plan, write_result_video
from crossview.cli.stereo_frames import is_sequence, stereo_frame_range, stereo_jobs
from crossview.console import stderr, stdout
from crossview.defaults import DEFAULT_STEREO_MODEL
from crossview.errors import UserError
from crossview.lazy import lazy_import

if TYPE_CHECKING:
    from crossview.api import StereoResult

api = lazy_import("crossview.api")


def _views(result: StereoResult) -> list[ViewTensors]:
    return [(result.disparity, result.valid, result.self_rpos),
            (result.disparity_right, result.valid_right, result.self_rpos_right)]


def _write_video(video: Path, files: list[Path], rate: Fraction, depth: bool) -> None:
    kind = "depth" if depth else "disparity"

    def encode(on_frame: Callable[[], None]) -> str:
        low, high = api.disparity_video.write_disparity_video(video, files, rate, depth=depth,
                                                          on_frame=on_frame)
        return f"{kind} {low:.3g} to {high:.3g} {'m' if depth else 'px'} on one colour range"

    write_result_video(video, len(files), rate, kind, encode)


def stereo_command(
    left: Annotated[str, typer.Argument(
        help="Left image, directory or glob pattern; or the left view's video; or, with "
        "--side-by-side, one side-by-side video or folder of side-by-side frames.")],
    right: Annotated[str | None, typer.Argument(
        help="Right image, directory, glob pattern or video (none with --side-by-side).")
    ] = None,
    out_dir: options.OutDir = Path("stereo-out"),
    model: options.Model = DEFAULT_STEREO_MODEL,
    weights: options.Weights = None,
    download: options.Download = False,
    device: options.Device = "cpu",
    precision: options.Precision = "fp32",
    lri: options.Lri = None,
    refine: options.Refine = None,
    fuse: options.Fuse = None,
    self_fuse: options.SelfFuse = False,
    preset: options.Preset = None,
    adapt: options.Adapt = 0,
    size: options.FixedSize = None,
    save_right: Annotated[bool, typer.Option(
        "--save-right", help="Also write the right view's disparity and mask.")] = False,
    save_rpos: options.SaveRpos = False,
    fmt: Annotated[str, typer.Option(
        "--format", help="Raw disparity: pfm, png16 or npy.")] = "pfm",
    save_confidence: SaveConfidence = False,
    calib: depth.Calib = None,
    focal: depth.Focal = None,
    baseline: depth.Baseline = None,
    doffs: depth.Doffs = None,
    cx: depth.Cx = None,
    cy: depth.Cy = None,
    depth_format: depth.DepthFormat = None,
    max_depth: depth.MaxDepth = None,
    edge_ratio: depth.EdgeRatio = None,
    min_confidence: options.MinConfidence = 0.0,
    skip_existing: options.SkipExisting = False,
    rectify: Annotated[bool, typer.Option(
        "--rectify", help="Two photographs taken by hand: rectify the pair from its own "
        "matches first (as `crossview rectify` without --calib; written to NAME_rectified/); "
        "the disparity is then the rectified left image's.")] = False,
    side_by_side: Annotated[bool, typer.Option(
        "--side-by-side", help="LEFT is one video file or one folder of frames, each frame "
        "the left view (its left half) beside the right view (its right half).")] = False,
    start: Annotated[int | None, typer.Option(
        "--start", help="Videos or folders of frames: the first frame to use (0-based; "
        "default 0).", show_default=False)] = None,
    stop: Annotated[int | None, typer.Option(
        "--stop", help="Videos or folders of frames: use the frames before this one "
        "(0-based, as a Python slice; default: to the end).", show_default=False)] = None,
    stride: Annotated[int | None, typer.Option(
        "--stride", help="Videos or folders of frames: use every N-th frame from --start, "
        "each one pair (default 1).", show_default=False)] = None,
    warm_start: Annotated[bool | None, typer.Option(
        "--warm-start/--cold-start", help="Start each frame's network from the previous "
        "frame's disparity (default: on for videos, off for folders and patterns, whose "
        "pairs need not be one camera's frames).", show_default=False)] = None,
    save_video: Annotated[bool, typer.Option(
        "--save-video", help="Videos or folders of frames: also write STEM_disp.mp4 "
        "(STEM_depth.mp4 with a calibration), the frames' coloured disparity (depth) in "
        "order on one colour range, made from their files once every frame is there "
        "(pip install 'crossview[video]').")] = False,
) -> None:
    """Estimate disparity for LEFT/RIGHT pairs (files, directories or glob patterns), for the
    frames of two videos or of one side-by-side video (--side-by-side; pip install
    'crossview[video]'), or for two folders of frames."""
    depth_files = depth.depth_output(calib, focal, baseline, doffs, cx, cy, depth_format,
                                     max_depth, edge_ratio)
    frames = stereo_frame_range(start, stop, stride)
    sequence = is_sequence(left, right, side_by_side)
    if rectify and (sequence or frames is not None or save_video):
        raise UserError("--rectify rectifies one pair of photographs, not videos or folders of "
                        "frames")
    if rectify and depth_files is not None:
        raise UserError("--rectify rectifies without a calibration, which gives no metric "
                        "depth: drop --calib / --focal / --baseline (or rectify with `crossview "
                        "rectify LEFT RIGHT --calib FILE` first)")
    dense = DenseOptions(out_dir, model, weights, device, precision, lri, size, save_right,
                         save_rpos, fmt, download=download, skip_existing=skip_existing,
                         refine=refine, min_confidence=min_confidence, adapt=adapt,
                         fuse=fuse, preset=preset, self_fuse=self_fuse)
    confidence = ConfidenceOutput(("disp", "disp_right")[: 2 if save_right else 1],
                                  lambda r: [r.confidence, r.confidence_right],
                                  dense.model_inputs())
    extras = [confidence] if save_confidence else []

    def run(first: str, second: str, more: Sequence[ExtraOutput] = ()) -> None:
        run_dense("stereo", first, second, dense, views=("disp", "disp_right"), tensors=_views,
                  extras=[*extras, *([depth_files] if depth_files else []), *more])

    if sequence or frames is not None or save_video or warm_start is not None:
        _run_frames(left, right, frames, side_by_side, sequence, warm_start, save_video,
                    dense, extras, depth_files)
    elif rectify:
        folder = stereo_on_rectified(left, right, out_dir, run)
        stdout.print(f"rectified pair (the disparity's frame) in {folder}", markup=False,
                     soft_wrap=True)
    else:
        run(left, right)


def _run_frames(left: str, right: str | None, frames: FrameRange | None, side_by_side: bool,
                sequence: bool, warm_start: bool | None, save_video: bool, dense: DenseOptions,
                extras: list[ExtraOutput], depth_files: depth.DepthOutput | None) -> None:
    """A run of frames (:mod:`crossview.cli.stereo_frames`), warm-started and with its video
    as asked."""
    video = None
    if save_video:
        folders = right is not None and Path(left).is_dir() and Path(right).is_dir()
        if not (sequence or folders):
            raise UserError("--save-video needs videos or folders of frames (the video shows "
                            "their frames in order), not image files or patterns")
        video = video_plan(left, dense.out_dir, 1 if frames is None else frames.stride,
                           "depth" if depth_files is not None else "disp")
    warm = sequence if warm_start is None else warm_start
    try:
        names = run_dense("stereo", left, right, dense, views=("disp", "disp_right"),
                          tensors=_views, extras=[*extras, *([depth_files] if depth_files else [])],
                          jobs=lambda: stereo_jobs(left, right, frames, side_by_side),
                          warm_start=warm)
    except typer.Exit:  # frames failed or the run was stopped
        if video is not None:
            stderr.print(f"note: {video[0]} not written: it needs every frame (--skip-existing "
                         "--save-video writes it once they are all there)", markup=False,
                         soft_wrap=True)
        raise
    if video is not None:
        if depth_files is not None:
            suffix = ".png" if depth_files.fmt == "png16" else f".{depth_files.fmt}"
            files = [dense.out_dir / f"{name}_depth{suffix}" for name in names]
        else:
            suffix = raw_suffix(dense.fmt, "disparity")
            files = [dense.out_dir / f"{name}_disp{suffix}" for name in names]
        _write_video(video[0], files, video[1], depth_files is not None)
