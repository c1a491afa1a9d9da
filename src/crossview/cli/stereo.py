"""``crossview stereo LEFT RIGHT``: disparity of rectified stereo pairs with MatchStereo.

Writes per pair into ``-o DIR`` (NAME = the left file's stem): ``NAME_disp.{pfm,png,npy}``
(raw disparity, px), ``NAME_disp_color.png`` (colourised, with a colour bar),
``NAME_disp_noc.png`` (left-right consistency mask, 255 = consistent); with ``--save-right``
the same for the right view (``NAME_disp_right*``), with ``--save-rpos`` the self relative
positions as ``NAME_disp_rpos.png``. Many pairs are written pair by pair
(:mod:`crossview.cli.batch`).
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from crossview.api import DEFAULT_STEREO_MODEL, StereoResult
from crossview.cli import options
from crossview.cli.dense import DenseOptions, ViewTensors, run_dense


def _views(result: StereoResult) -> list[ViewTensors]:
    return [(result.disparity, result.valid, result.self_rpos),
            (result.disparity_right, result.valid_right, result.self_rpos_right)]


def stereo_command(
    left: Annotated[str, typer.Argument(help="Left image, directory or glob pattern.")],
    right: Annotated[str, typer.Argument(help="Right image, directory or glob pattern.")],
    out_dir: options.OutDir = Path("stereo-out"),
    model: options.Model = DEFAULT_STEREO_MODEL,
    weights: options.Weights = None,
    device: options.Device = "cpu",
    precision: options.Precision = "fp32",
    lri: options.Lri = False,
    size: options.FixedSize = None,
    save_right: Annotated[bool, typer.Option(
        "--save-right", help="Also write the right view's disparity and mask.")] = False,
    save_rpos: options.SaveRpos = False,
    fmt: Annotated[str, typer.Option(
        "--format", help="Raw disparity: pfm, png16 or npy.")] = "pfm",
    skip_existing: options.SkipExisting = False,
) -> None:
    """Estimate disparity for LEFT/RIGHT pairs (files, directories or glob patterns)."""
    run_dense("stereo", left, right, DenseOptions(
        out_dir, model, weights, device, precision, lri, size, save_right, save_rpos, fmt,
        skip_existing=skip_existing),
        views=("disp", "disp_right"), tensors=_views)
