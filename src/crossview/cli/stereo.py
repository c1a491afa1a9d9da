"""``crossview stereo LEFT RIGHT``: disparity of rectified stereo pairs with MatchStereo.

Writes per pair into ``-o DIR`` (NAME = the left file's stem): ``NAME_disp.{pfm,png,npy}``
(raw disparity, px), ``NAME_disp_color.png`` (colourised, with a colour bar),
``NAME_disp_noc.png`` (left-right consistency mask, 255 = consistent); with ``--save-right``
the same for the right view (``NAME_disp_right*``), with ``--save-rpos`` the self relative
positions as ``NAME_disp_rpos.png``.
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


def stereo_command(
    left: Annotated[str, typer.Argument(help="Left image, directory or glob pattern.")],
    right: Annotated[str, typer.Argument(help="Right image, directory or glob pattern.")],
    out_dir: OutDir = Path("stereo-out"),
    model: Annotated[str, typer.Option(help="Model name (see crossview.list_models()).")] = (
        "matchstereo-t"),
    weights: Weights = None,
    device: Device = "cpu",
    precision: Precision = "fp32",
    lri: Lri = False,
    size: Size = None,
    save_right: Annotated[bool, typer.Option(
        "--save-right", help="Also write the right view's disparity and mask.")] = False,
    save_rpos: SaveRpos = False,
    fmt: Annotated[str, typer.Option("--format", help="Raw disparity: pfm, png16 or npy.")] = (
        "pfm"),
) -> None:
    """Estimate disparity for LEFT/RIGHT pairs (files, directories or glob patterns)."""
    options = DenseOptions(out_dir, model, weights, device, precision, lri, size, save_right,
                           save_rpos, fmt)
    run_dense("stereo", left, right, options, _outputs)


def _outputs(name: str, images: tuple[np.ndarray, np.ndarray], result,
             options: DenseOptions) -> dict[str, Callable]:
    files = view_outputs(f"{name}_disp", result.disparity[0].cpu().numpy(), "disparity",
                         result.valid[0].cpu().numpy(), result.self_rpos[0].cpu().numpy(),
                         images[0], options)
    if options.save_right:
        files |= view_outputs(f"{name}_disp_right", result.disparity_right[0].cpu().numpy(),
                              "disparity", result.valid_right[0].cpu().numpy(),
                              result.self_rpos_right[0].cpu().numpy(), images[1], options)
    return files
