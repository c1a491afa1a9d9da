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
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from crossview.cli import depth_output as depth
from crossview.cli import options
from crossview.cli.confidence_output import ConfidenceOutput, SaveConfidence
from crossview.cli.dense import DenseOptions, ExtraOutput, ViewTensors, run_dense
from crossview.cli.rectified_stereo import stereo_on_rectified
from crossview.console import stdout
from crossview.defaults import DEFAULT_STEREO_MODEL
from crossview.errors import UserError

if TYPE_CHECKING:
    from crossview.api import StereoResult


def _views(result: StereoResult) -> list[ViewTensors]:
    return [(result.disparity, result.valid, result.self_rpos),
            (result.disparity_right, result.valid_right, result.self_rpos_right)]


def stereo_command(
    left: Annotated[str, typer.Argument(help="Left image, directory or glob pattern.")],
    right: Annotated[str, typer.Argument(help="Right image, directory or glob pattern.")],
    out_dir: options.OutDir = Path("stereo-out"),
    model: options.Model = DEFAULT_STEREO_MODEL,
    weights: options.Weights = None,
    download: options.Download = False,
    device: options.Device = "cpu",
    precision: options.Precision = "fp32",
    lri: options.Lri = None,
    refine: options.Refine = None,
    fuse: options.Fuse = None,
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
) -> None:
    """Estimate disparity for LEFT/RIGHT pairs (files, directories or glob patterns)."""
    depth_files = depth.depth_output(calib, focal, baseline, doffs, cx, cy, depth_format,
                                     max_depth, edge_ratio)
    if rectify and depth_files is not None:
        raise UserError("--rectify rectifies without a calibration, which gives no metric "
                        "depth: drop --calib / --focal / --baseline (or rectify with `crossview "
                        "rectify LEFT RIGHT --calib FILE` first)")
    dense = DenseOptions(out_dir, model, weights, device, precision, lri, size, save_right,
                         save_rpos, fmt, download=download, skip_existing=skip_existing,
                         refine=refine, min_confidence=min_confidence, adapt=adapt,
                         fuse=fuse)
    confidence = ConfidenceOutput(("disp", "disp_right")[: 2 if save_right else 1],
                                  lambda r: [r.confidence, r.confidence_right],
                                  dense.model_inputs())
    extras = [confidence] if save_confidence else []

    def run(first: str, second: str, more: Sequence[ExtraOutput] = ()) -> None:
        run_dense("stereo", first, second, dense, views=("disp", "disp_right"), tensors=_views,
                  extras=[*extras, *([depth_files] if depth_files else []), *more])

    if rectify:
        folder = stereo_on_rectified(left, right, out_dir, run)
        stdout.print(f"rectified pair (the disparity's frame) in {folder}", markup=False,
                     soft_wrap=True)
    else:
        run(left, right)
