"""``crossview flow FRAME0 FRAME1``: optical flow with MatchFlow.

Writes per pair into ``-o DIR`` (NAME = the first frame's stem): ``NAME_flow.{flo,pfm,png,npy}``
(raw forward flow, px; pfm holds (u, v, 0)), ``NAME_flow_color.png`` (standard colour wheel),
``NAME_flow_noc.png`` (forward-backward consistency mask); with ``--save-right`` the backward
flow (``NAME_flow_backward*``), with ``--save-rpos`` the self relative positions as
``NAME_flow_rpos.png``.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Annotated

import numpy as np
import typer

from crossview.cli.dense import (
    DenseOptions,
    Device,
    Lri,
    OutDir,
    Precision,
    SaveRpos,
    Size,
    Weights,
    run_dense,
    view_outputs,
)


def flow_command(
    frame0: Annotated[str, typer.Argument(help="First frame, directory or glob pattern.")],
    frame1: Annotated[str, typer.Argument(help="Second frame, directory or glob pattern.")],
    out_dir: OutDir = Path("flow-out"),
    model: Annotated[str, typer.Option(help="Model name (see crossview.list_models()).")] = (
        "matchflow-b"),
    weights: Weights = None,
    device: Device = "cpu",
    precision: Precision = "fp32",
    lri: Lri = False,
    size: Size = None,
    save_right: Annotated[bool, typer.Option(
        "--save-right", help="Also write the backward flow (FRAME1 -> FRAME0) and its mask.")
    ] = False,
    save_rpos: SaveRpos = False,
    fmt: Annotated[str, typer.Option("--format", help="Raw flow: flo, pfm, png16 or npy.")] = (
        "flo"),
) -> None:
    """Estimate optical flow for FRAME0/FRAME1 pairs (files, directories or glob patterns)."""
    options = DenseOptions(out_dir, model, weights, device, precision, lri, size, save_right,
                           save_rpos, fmt)
    run_dense("flow", frame0, frame1, options, _outputs)


def _outputs(name: str, images: tuple[np.ndarray, np.ndarray], result,
             options: DenseOptions) -> dict[str, Callable]:
    def channel_last(flow):
        return flow[0].permute(1, 2, 0).cpu().numpy()

    files = view_outputs(f"{name}_flow", channel_last(result.flow), "flow",
                         result.valid[0].cpu().numpy(), result.self_rpos[0].cpu().numpy(),
                         images[0], options)
    if options.save_right:
        files |= view_outputs(f"{name}_flow_backward", channel_last(result.flow_backward), "flow",
                              result.valid_backward[0].cpu().numpy(),
                              result.self_rpos_backward[0].cpu().numpy(), images[1], options)
    return files
