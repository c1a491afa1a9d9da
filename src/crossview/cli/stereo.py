"""``crossview stereo LEFT RIGHT``: disparity of rectified stereo pairs with MatchStereo.

Writes per pair into ``-o DIR`` (NAME = the left file's stem): ``NAME_disp.{pfm,png,npy}``
(raw disparity, px), ``NAME_disp_color.png`` (colourised, with a colour bar),
``NAME_disp_noc.png`` (left-right consistency mask, 255 = consistent); with ``--save-right``
the same for the right view (``NAME_disp_right*``), with ``--save-rpos`` the self relative
positions as ``NAME_disp_rpos.png``.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from crossview.cli.dense import DenseOptions, make_command, pair_outputs
from crossview.models.defaults import DEFAULT_STEREO_MODEL


def _outputs(name: str, images: tuple[np.ndarray, np.ndarray], result,
             options: DenseOptions) -> dict[str, Callable]:
    views = [("disp", result.disparity, result.valid, result.self_rpos),
             ("disp_right", result.disparity_right, result.valid_right, result.self_rpos_right)]
    return pair_outputs(name, images, views, "disparity", options)


stereo_command = make_command(
    "stereo", inputs=(("left", "Left image, directory or glob pattern."),
                      ("right", "Right image, directory or glob pattern.")),
    out_default="stereo-out", model_default=DEFAULT_STEREO_MODEL, fmt_default="pfm",
    fmt_help="Raw disparity: pfm, png16 or npy.",
    save_right_help="Also write the right view's disparity and mask.",
    doc="Estimate disparity for LEFT/RIGHT pairs (files, directories or glob patterns).",
    outputs=_outputs)
