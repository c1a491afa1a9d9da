"""``crossview stereo LEFT RIGHT``: disparity of rectified stereo pairs with MatchStereo.

Writes per pair into ``-o DIR`` (NAME = the left file's stem): ``NAME_disp.{pfm,png,npy}``
(raw disparity, px), ``NAME_disp_color.png`` (colourised, with a colour bar),
``NAME_disp_noc.png`` (left-right consistency mask, 255 = consistent); with ``--save-right``
the same for the right view (``NAME_disp_right*``), with ``--save-rpos`` the self relative
positions as ``NAME_disp_rpos.png``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import torch

from crossview.cli.dense import make_command
from crossview.models.defaults import DEFAULT_STEREO_MODEL

if TYPE_CHECKING:  # the api loads torch models: not needed to build the command
    from crossview.api import StereoResult


def _fields(result: StereoResult) -> list[tuple[torch.Tensor, torch.Tensor, torch.Tensor]]:
    return [(result.disparity, result.valid, result.self_rpos),
            (result.disparity_right, result.valid_right, result.self_rpos_right)]


stereo_command = make_command(
    "stereo", inputs=(("left", "Left image, directory or glob pattern."),
                      ("right", "Right image, directory or glob pattern.")),
    out_default="stereo-out", model_default=DEFAULT_STEREO_MODEL, fmt_default="pfm",
    fmt_help="Raw disparity: pfm, png16 or npy.",
    save_right_help="Also write the right view's disparity and mask.",
    doc="Estimate disparity for LEFT/RIGHT pairs (files, directories or glob patterns).",
    views=("disp", "disp_right"), fields=_fields)
