"""``crossview flow FRAME0 FRAME1``: optical flow with MatchFlow.

Writes per pair into ``-o DIR`` (NAME = the first frame's stem): ``NAME_flow.{flo,pfm,png,npy}``
(raw forward flow, px; pfm holds (u, v, 0)), ``NAME_flow_color.png`` (standard colour wheel,
its key on the right: the wheel, labelled with the magnitude of full colour, the pair's
largest; :func:`crossview.viz.flow_to_colour`), ``NAME_flow_noc.png`` (forward-backward
consistency mask); with ``--save-right`` the backward flow (``NAME_flow_backward*``), with
``--save-rpos`` the self relative positions as ``NAME_flow_rpos.png``, with
``--save-confidence`` the confidence from forward-backward consistency
(:mod:`crossview.cli.confidence_output`). A video ``V.mp4`` gives one pair per
consecutive frames, named ``V_000000`` (frames 0 and 1), ..., a folder of frames one pair per
consecutive images in name order, named by the first; ``--start``, ``--stop`` and ``--stride``
choose the frames (:class:`crossview.cli.dense.FrameRange`: frames start, start + stride, ...
before stop; each pair is one of them and the next). Many pairs are written pair by pair
(:mod:`crossview.cli.batch`). With ``--save-video`` (a video or a folder of frames only),
``STEM_flow.mp4`` (STEM: the video's stem or the folder's name) shows the run's pairs in
order once every pair's files are there: it is made from those files
(:mod:`crossview.data.flow_video`), so pairs that ``--skip-existing`` kept are in it, and it
is published whole or not at all (a run with failed pairs, or stopped, writes none).
"""

from __future__ import annotations

from collections.abc import Callable
from fractions import Fraction
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from crossview.cli import options
from crossview.cli.confidence_output import ConfidenceOutput, SaveConfidence
from crossview.cli.dense import DenseOptions, FrameRange, ViewTensors, raw_suffix, run_dense
from crossview.cli.result_video import FOLDER_RATE, video_plan, write_result_video
from crossview.console import stderr
from crossview.defaults import DEFAULT_FLOW_MODEL
from crossview.errors import UserError
from crossview.lazy import lazy_import

if TYPE_CHECKING:
    from crossview.api import FlowResult

api = lazy_import("crossview.api")


def _views(result: FlowResult) -> list[ViewTensors]:
    return [(result.flow.permute(0, 2, 3, 1), result.valid, result.self_rpos),
            (result.flow_backward.permute(0, 2, 3, 1), result.valid_backward,
             result.self_rpos_backward)]


def _video_plan(source: str, second: str | None, out_dir: Path, stride: int
                ) -> tuple[Path, Fraction]:
    """``(path, rate)`` of the ``--save-video`` video of ``source`` (one video file or one
    folder of frames): ``OUT/STEM_flow.mp4``, checked writable, at the source's frame rate
    over ``stride`` (a folder, or a video that gives no rate: :data:`FOLDER_RATE`); a
    :class:`UserError` for two inputs or without PyAV, before the model loads."""
    if second is not None:
        raise UserError("--save-video needs one video file or one folder of frames (the video "
                        "shows its pairs in order), not two inputs")
    return video_plan(source, out_dir, stride, "flow")


def _write_video(video: Path, flows: list[Path], rate: Fraction) -> None:
    """Write the flow video ``video`` of the saved ``flows``; Ctrl-C meanwhile leaves none
    and exits with code 130."""

    def encode(on_frame: Callable[[], None]) -> str:
        scale = api.flow_video.write_flow_video(video, flows, rate, on_frame=on_frame)
        return f"full colour at {scale:.3g} px"

    write_result_video(video, len(flows), rate, "flow", encode)


def flow_command(
    frame0: Annotated[str, typer.Argument(
        help="First frame, directory or glob pattern; or a video file or a folder of frames "
        "alone (pairs of consecutive frames, folders in name order).")],
    frame1: Annotated[str | None, typer.Argument(
        help="Second frame, directory or glob pattern (none for a video or a folder of "
        "frames).")] = None,
    out_dir: options.OutDir = Path("flow-out"),
    model: options.Model = DEFAULT_FLOW_MODEL,
    weights: options.Weights = None,
    download: options.Download = False,
    device: options.Device = "cpu",
    precision: options.Precision = "fp32",
    lri: options.Lri = None,
    refine: options.Refine = None,
    fuse: options.FuseFlow = None,
    preset: options.Preset = None,
    adapt: options.Adapt = 0,
    size: options.FixedSize = None,
    save_right: Annotated[bool, typer.Option(
        "--save-right", help="Also write the backward flow (FRAME1 -> FRAME0) and its mask.")
    ] = False,
    save_rpos: options.SaveRpos = False,
    fmt: Annotated[str, typer.Option(
        "--format", help="Raw flow: flo, pfm, png16 or npy.")] = "flo",
    save_confidence: SaveConfidence = False,
    min_confidence: options.MinConfidence = 0.0,
    skip_existing: options.SkipExisting = False,
    start: Annotated[int | None, typer.Option(
        "--start", help="Video or folder of frames: the first frame to use (0-based; "
        "default 0).", show_default=False)] = None,
    stop: Annotated[int | None, typer.Option(
        "--stop", help="Video or folder of frames: use the frames before this one (0-based, "
        "as a Python slice; default: to the end).", show_default=False)] = None,
    stride: Annotated[int | None, typer.Option(
        "--stride", help="Video or folder of frames: use every N-th frame from --start; each "
        "pair is a used frame and the next (frames i and i+N), one pair per N frames "
        "(default 1).", show_default=False)] = None,
    save_video: Annotated[bool, typer.Option(
        "--save-video", help="Video or folder of frames: also write STEM_flow.mp4, the "
        "colour-coded flow of the run's pairs in order (one colour scale for all), made from "
        "their files once every pair is there (pip install 'crossview[video]').")] = False,
) -> None:
    """Estimate optical flow for FRAME0/FRAME1 pairs (files, directories or glob patterns), for
    the consecutive frames of one video file (pip install 'crossview[video]') or of one folder
    of frames."""
    frames = None if start is None and stop is None and stride is None else FrameRange(
        0 if start is None else start, stop, 1 if stride is None else stride)
    dense = DenseOptions(out_dir, model, weights, device, precision, lri, size, save_right,
                         save_rpos, fmt, download=download, skip_existing=skip_existing,
                         refine=refine, frames=frames,
                         min_confidence=min_confidence, adapt=adapt, fuse=fuse,
                         preset=preset)
    confidence = ConfidenceOutput(("flow", "flow_backward")[: 2 if save_right else 1],
                                  lambda r: [r.confidence, r.confidence_backward],
                                  dense.model_inputs())
    extras = [confidence] if save_confidence else []
    video, video_rate = _video_plan(frame0, frame1, out_dir, 1 if stride is None else stride
                                    ) if save_video else (None, FOLDER_RATE)
    try:
        names = run_dense("flow", frame0, frame1, dense, views=("flow", "flow_backward"),
                          tensors=_views, extras=extras)
    except typer.Exit:  # pairs failed or the run was stopped
        if video is not None:
            stderr.print(f"note: {video} not written: it needs every pair (--skip-existing "
                         "--save-video writes it once they are all there)", markup=False,
                         soft_wrap=True)
        raise
    if video is not None:
        _write_video(video, [out_dir / f"{name}_flow{raw_suffix(fmt, 'flow')}" for name in names],
                     rate=video_rate)
