"""``crossview flow FRAME0 FRAME1``: optical flow with MatchFlow.

Writes per pair into ``-o DIR`` (NAME = the first frame's stem): ``NAME_flow.{flo,pfm,png,npy}``
(raw forward flow, px; pfm holds (u, v, 0)), ``NAME_flow_color.png`` (standard colour wheel),
``NAME_flow_noc.png`` (forward-backward consistency mask); with ``--save-right`` the backward
flow (``NAME_flow_backward*``), with ``--save-rpos`` the self relative positions as
``NAME_flow_rpos.png``, with ``--save-confidence`` the confidence from forward-backward
consistency (:mod:`crossview.cli.confidence_output`). A video ``V.mp4`` gives one pair per
consecutive frames, named ``V_000000`` (frames 0 and 1), ... Many pairs are written pair by
pair (:mod:`crossview.cli.batch`).
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from crossview.api import DEFAULT_FLOW_MODEL, FlowResult
from crossview.cli import options
from crossview.cli.confidence_output import ConfidenceOutput, SaveConfidence
from crossview.cli.dense import DenseOptions, ViewTensors, run_dense


def _views(result: FlowResult) -> list[ViewTensors]:
    return [(result.flow.permute(0, 2, 3, 1), result.valid, result.self_rpos),
            (result.flow_backward.permute(0, 2, 3, 1), result.valid_backward,
             result.self_rpos_backward)]


def flow_command(
    frame0: Annotated[str, typer.Argument(
        help="First frame, directory, glob pattern or a video file (consecutive frames).")],
    frame1: Annotated[str | None, typer.Argument(
        help="Second frame, directory or glob pattern (none for a video).")] = None,
    out_dir: options.OutDir = Path("flow-out"),
    model: options.Model = DEFAULT_FLOW_MODEL,
    weights: options.Weights = None,
    download: options.Download = False,
    device: options.Device = "cpu",
    precision: options.Precision = "fp32",
    lri: options.Lri = False,
    refine: options.Refine = None,
    size: options.FixedSize = None,
    save_right: Annotated[bool, typer.Option(
        "--save-right", help="Also write the backward flow (FRAME1 -> FRAME0) and its mask.")
    ] = False,
    save_rpos: options.SaveRpos = False,
    fmt: Annotated[str, typer.Option(
        "--format", help="Raw flow: flo, pfm, png16 or npy.")] = "flo",
    save_confidence: SaveConfidence = False,
    skip_existing: options.SkipExisting = False,
) -> None:
    """Estimate optical flow for FRAME0/FRAME1 pairs (files, directories or glob patterns) or
    for the consecutive frames of one video file (pip install 'crossview[video]')."""
    dense = DenseOptions(out_dir, model, weights, device, precision, lri, size, save_right,
                         save_rpos, fmt, download=download, skip_existing=skip_existing,
                         refine=refine)
    confidence = ConfidenceOutput(("flow", "flow_backward")[: 2 if save_right else 1],
                                  lambda r: [r.confidence, r.confidence_backward],
                                  dense.model_inputs())
    extras = [confidence] if save_confidence else []
    run_dense("flow", frame0, frame1, dense, views=("flow", "flow_backward"), tensors=_views,
              extras=extras)
