"""Inference on one image pair of any sizes: keypoint transfer and dense flows both ways.

The images are resized to the model's square input (as the paper does); because positions are
handled in normalised ``[-1, 1]`` coordinates, keypoints and flows map back to each image's own
pixel frame exactly.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import numpy as np
import torch
import torch.nn.functional as F
from torch import Tensor

from crossview.data.image_batch import sample_image
from crossview.errors import UserError
from crossview.models.transformatcher.model import TASK, TransforMatcher, uses_placement
from crossview.models.transformatcher.softargmax import (
    grid_centres,
    normalised_to_pixels,
    pixels_to_normalised,
)
from crossview.models.weights import read_state_dict

WEIGHTS = Path(__file__).resolve().parents[1] / "weights" / "transformatcher_lite0.safetensors"
EVAL_TAU = 0.05


def load_transformatcher(weights: str | os.PathLike | None = None, **options: Any
                         ) -> TransforMatcher:
    """TransforMatcher (240 x 240 input) with its trained weights: ``weights`` or the bundled
    file trained on synthetic warps (EfficientNet-Lite0 backbone only); ``options`` are the
    constructor's (``backbone``, ``backbone_weights``, ...). A file that carries a tuned
    backbone restores it; a head-only file keeps the ImageNet backbone. A ``.safetensors`` file
    recording another task (stereo or flow weights) is a :class:`UserError`."""
    path = Path(weights) if weights is not None else WEIGHTS
    if path == WEIGHTS and options.get("backbone", "efficientnet-lite0") != "efficientnet-lite0":
        raise UserError("the bundled TransforMatcher weights are for the efficientnet-lite0 "
                        "backbone; pass weights=... for another backbone")
    state = read_state_dict(path, task=TASK)
    return transformatcher_from_state(state, path, **options).eval()


def transformatcher_from_state(state: dict[str, Tensor], source: str | os.PathLike,
                               **options: Any) -> TransforMatcher:
    """A :class:`TransforMatcher` (``options``: its constructor's, placement chosen by
    ``state``) loaded with ``state`` (:meth:`TransforMatcher.trained_state_dict`, read from
    ``source``); weights that do not fit are a :class:`UserError` naming ``source``."""
    model = TransforMatcher(placement=uses_placement(state), **options)
    try:
        model.load_trained_state_dict(state)
    except ValueError as error:
        raise UserError(f"{source}: not TransforMatcher weights ({error})") from None
    return model


def _dense_flow(coords: Tensor, src_size: tuple[int, int], tgt_size: tuple[int, int],
                frame_shift: float = 0.0) -> Tensor:
    """``coords [1, G, G, 2]`` (normalised target position of each source cell, in a grid frame
    offset by ``frame_shift`` from the image frame, see
    :attr:`~crossview.models.transformatcher.model.TransforMatcher.frame_shift`) -> pixel flow
    ``[2, Hs, Ws]`` from the source frame into the target frame.

    The normalised displacement is interpolated (not the positions: clamping at the border would
    bend an identity map) at each source pixel's grid-frame position, then both ends are mapped
    to their own pixel frames."""
    (hs, ws), (ht, wt) = src_size, tgt_size
    g = coords.shape[1:3]
    shift = (coords - grid_centres(*g, coords.device, coords.dtype)).permute(0, 3, 1, 2)
    ys, xs = torch.meshgrid(torch.arange(hs, dtype=coords.dtype, device=coords.device),
                            torch.arange(ws, dtype=coords.dtype, device=coords.device),
                            indexing="ij")
    pixels = torch.stack((xs, ys), -1)
    source = pixels_to_normalised(pixels, ws, hs)
    shift = F.grid_sample(shift, (source + frame_shift)[None], mode="bilinear",
                          padding_mode="border", align_corners=False)
    target = normalised_to_pixels(source + shift[0].permute(1, 2, 0), wt, ht)
    return (target - pixels).permute(2, 0, 1)


def match_pair(model: TransforMatcher, src: Tensor, tgt: Tensor, points: Tensor,
               ) -> tuple[Tensor, Tensor, Tensor]:
    """Images ``[1, 3, Hs, Ws]``, ``[1, 3, Ht, Wt]`` (0..255), source pixel ``points [N, 2]``
    -> ``(transferred [N, 2] target px, flow [2, Hs, Ws], flow_backward [2, Ht, Wt])``."""
    size = (model.image_size, model.image_size)
    (hs, ws), (ht, wt) = src.shape[-2:], tgt.shape[-2:]

    def resize(x: Tensor) -> Tensor:
        return F.interpolate(x, size=size, mode="bilinear", align_corners=False, antialias=True)

    corr = model.correlation(resize(src), resize(tgt))
    # target -> source is the same correlation with the two images' axes swapped; both
    # directions are refined as one batch of two.
    forward, backward = model.refine(torch.cat((corr, corr.permute(0, 1, 4, 5, 2, 3))))[
        "coords"].chunk(2)
    kp = pixels_to_normalised(points, ws, hs)[None]
    transferred = normalised_to_pixels(model.transfer(forward, kp, EVAL_TAU)[0], wt, ht)
    shift = model.frame_shift
    return (transferred, _dense_flow(forward, (hs, ws), (ht, wt), shift),
            _dense_flow(backward, (ht, wt), (hs, ws), shift))


def keypoint_predictor(model: TransforMatcher, device: str = "cpu", precision: str = "fp32"
                       ) -> Callable[[Mapping[str, Any]], np.ndarray]:
    """A ``crossview.eval`` predictor for semantic samples: transfers ``keypoints0`` of
    ``image0`` into ``image1`` on ``device``; returns ``[N, 2]`` target pixels (invalid rows are
    ignored by the PCK metrics). TransforMatcher runs in ``precision="fp32"`` only."""
    if precision != "fp32":
        raise UserError(f"TransforMatcher runs in fp32 only, not precision {precision!r}")
    model.eval()

    def predict(sample: Mapping[str, Any]) -> np.ndarray:
        src, tgt = (sample_image(sample[k]).to(device) for k in ("image0", "image1"))
        points = torch.from_numpy(np.asarray(sample["keypoints0"], np.float32)).to(device)
        with torch.inference_mode():
            transferred, _, _ = match_pair(model, src, tgt, points)
        return transferred.cpu().numpy()

    return predict
