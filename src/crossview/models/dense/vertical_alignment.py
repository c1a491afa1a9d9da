"""A stereo pair's rows lined up before matching.

A rectified pair's matches lie on the same row. Photographs from a rig that is slightly off, or
whose rectification is, hold a vertical offset between the views, which both halves of the fused
default pay for: SGBM searches along the row only and the network was trained on rectified pairs
(docs/results/real_vertical_offset.py measures it on real scenes). :func:`vertical_offset`
measures the offset as the median vertical component of OpenCV DIS's flow from the left image to
the right at the pixels whose forward-backward error is below :data:`CONSISTENT_PX`;
:func:`rows_shifted` moves images or fields along y with bilinear interpolation. The offset is
one number per pair: a rotation or a scale difference between the views is not modelled.
"""

from __future__ import annotations

import math

import numpy as np
import torch

from crossview.geometry.consistency import consistency_error
from crossview.models.dense.classical import dis_flow, require_cv2

OFFSET_PIXELS = 250_000  # the offset is measured on the pair shrunk to at most this many pixels
CONSISTENT_PX = 0.5  # forward-backward error (L1, px at the measuring size) of a counted match


def vertical_offset(left: np.ndarray, right: np.ndarray) -> float:
    """The vertical offset (px) of the right image's rows against the left's: a left pixel
    ``(x, y)`` matches the right pixel ``(x - d, y + offset)``; RGB uint8 ``[H, W, 3]`` images.
    0.0 when no match passes the forward-backward check."""
    h, w = left.shape[:2]
    factor = min(1.0, math.sqrt(OFFSET_PIXELS / (h * w)))
    if factor < 1:
        opencv = require_cv2("the vertical offset of a stereo pair")
        size = (max(1, round(w * factor)), max(1, round(h * factor)))
        left, right = (opencv.resize(np.ascontiguousarray(image), size,
                                     interpolation=opencv.INTER_AREA) for image in (left, right))
    flows = torch.from_numpy(np.stack([dis_flow(left, right), dis_flow(right, left)]))
    error, inside = consistency_error(flows)
    counted = (error[0] < CONSISTENT_PX) & inside[0]
    if not counted.any():
        return 0.0
    return float(flows[0, ..., 1][counted].median()) / factor


def rows_shifted(x: torch.Tensor, by: torch.Tensor) -> torch.Tensor:
    """``x [N, C, H, W]`` sampled ``by [N]`` rows further down (``out[..., y, :] =
    x[..., y + by, :]``), linear between rows, the first and last rows repeated beyond the
    border (exact for whole rows)."""
    n, c, h, w = x.shape
    rows = torch.arange(h, dtype=torch.float64, device=x.device)[None]
    rows = (rows + by.to(x.device, torch.float64)[:, None]).clamp(0, h - 1)
    above = rows.floor().long()
    below = (above + 1).clamp(max=h - 1)
    weight = (rows - above).to(x.dtype)[:, None, :, None]  # [N, 1, H, 1]

    def gather(index: torch.Tensor) -> torch.Tensor:
        return x.gather(2, index[:, None, :, None].expand(n, c, h, w))

    return gather(above) * (1 - weight) + gather(below) * weight
