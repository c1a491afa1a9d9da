"""``crossview flow FRAME0 FRAME1``: optical flow with MatchFlow.

Writes per pair into ``-o DIR`` (NAME = the first frame's stem): ``NAME_flow.{flo,pfm,png,npy}``
(raw forward flow, px; pfm holds (u, v, 0)), ``NAME_flow_color.png`` (standard colour wheel),
``NAME_flow_noc.png`` (forward-backward consistency mask); with ``--save-right`` the backward
flow (``NAME_flow_backward*``), with ``--save-rpos`` the self relative positions as
``NAME_flow_rpos.png``.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from crossview.cli.dense import DenseOptions, make_command, pair_outputs
from crossview.models.defaults import DEFAULT_FLOW_MODEL


def _outputs(name: str, images: tuple[np.ndarray, np.ndarray], result,
             options: DenseOptions) -> dict[str, Callable]:
    views = [("flow", result.flow.permute(0, 2, 3, 1), result.valid, result.self_rpos),
             ("flow_backward", result.flow_backward.permute(0, 2, 3, 1), result.valid_backward,
              result.self_rpos_backward)]
    return pair_outputs(name, images, views, "flow", options)


flow_command = make_command(
    "flow", inputs=(("frame0", "First frame, directory or glob pattern."),
                    ("frame1", "Second frame, directory or glob pattern.")),
    out_default="flow-out", model_default=DEFAULT_FLOW_MODEL, fmt_default="flo",
    fmt_help="Raw flow: flo, pfm, png16 or npy.",
    save_right_help="Also write the backward flow (FRAME1 -> FRAME0) and its mask.",
    doc="Estimate optical flow for FRAME0/FRAME1 pairs (files, directories or glob patterns).",
    outputs=_outputs)
