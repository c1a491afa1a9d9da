"""Absolute placement of matches: where in the two images a match ``(source cell, target cell)``
sits, as features a linear layer can read.

The 4D RoPE of the match-to-match attention is relative, so the refinement alone cannot tell a
match at an image side from one in the middle. Near the sides the backbone sees padding and the
correlation is less reliable (docs/transformatcher.md, "Keypoints near the borders"); these
features let the refinement learn side-dependent corrections.
"""

from __future__ import annotations

import math

import torch
from torch import Tensor

from crossview.models.keypoints.coordinates import cell_centres

FREQUENCIES = 4
FEATURES = 4 * (1 + 2 * FREQUENCIES)  # per axis: the coordinate, then a sine and a cosine each


def placement_features(h_src: int, w_src: int, h_tgt: int, w_tgt: int,
                       device: torch.device | None = None) -> Tensor:
    """Features ``[h_src * w_src * h_tgt * w_tgt, FEATURES]`` of every match, in the row-major
    order of a correlation ``[h_src, w_src, h_tgt, w_tgt]``.

    For each axis ``(y_src, x_src, y_tgt, x_tgt)`` with normalised cell centre ``c`` in
    ``(-1, 1)``: ``c``, then ``sin(k pi c / 2)`` and ``cos(k pi c / 2)`` for ``k = 1 ..
    FREQUENCIES``. They depend on the normalised position only, so one trained layer serves
    every grid size.
    """
    axes = [cell_centres(n, device) for n in (h_src, w_src, h_tgt, w_tgt)]
    coords = torch.stack(torch.meshgrid(*axes, indexing="ij"), dim=-1).reshape(-1, 4, 1)
    phase = coords * (math.pi / 2) * torch.arange(1, FREQUENCIES + 1, device=device)
    return torch.cat((coords, phase.sin(), phase.cos()), dim=-1).flatten(1)
