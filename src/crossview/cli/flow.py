"""``crossview flow FRAME0 FRAME1``: optical flow with MatchFlow.

Writes per pair into ``-o DIR`` (NAME = the first frame's stem): ``NAME_flow.{flo,pfm,png,npy}``
(raw forward flow, px; pfm holds (u, v, 0)), ``NAME_flow_color.png`` (standard colour wheel),
``NAME_flow_noc.png`` (forward-backward consistency mask); with ``--save-right`` the backward
flow (``NAME_flow_backward*``), with ``--save-rpos`` the self relative positions as
``NAME_flow_rpos.png``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import torch

from crossview.cli.dense import make_command
from crossview.models.defaults import DEFAULT_FLOW_MODEL

if TYPE_CHECKING:  # the api loads torch models: not needed to build the command
    from crossview.api import FlowResult


def _fields(result: FlowResult) -> list[tuple[torch.Tensor, torch.Tensor, torch.Tensor]]:
    return [(result.flow.permute(0, 2, 3, 1), result.valid, result.self_rpos),
            (result.flow_backward.permute(0, 2, 3, 1), result.valid_backward,
             result.self_rpos_backward)]


flow_command = make_command(
    "flow", inputs=(("frame0", "First frame, directory or glob pattern."),
                    ("frame1", "Second frame, directory or glob pattern.")),
    out_default="flow-out", model_default=DEFAULT_FLOW_MODEL, fmt_default="flo",
    fmt_help="Raw flow: flo, pfm, png16 or npy.",
    save_right_help="Also write the backward flow (FRAME1 -> FRAME0) and its mask.",
    doc="Estimate optical flow for FRAME0/FRAME1 pairs (files, directories or glob patterns).",
    views=("flow", "flow_backward"), fields=_fields)
