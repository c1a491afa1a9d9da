"""Inference on one image pair of any sizes: keypoint transfer and dense flows both ways.

The images are resized to the model's square input (as the paper does); because positions are
handled in normalised ``[-1, 1]`` coordinates, keypoints and flows map back to each image's own
pixel frame exactly.
"""

from __future__ import annotations

import hashlib
import os
from collections import OrderedDict
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import numpy as np
import torch
import torch.nn.functional as F
from torch import Tensor

from crossview.data.image_batch import sample_image
from crossview.errors import UserError
from crossview.models.transformatcher.model import (
    TASK,
    TransforMatcher,
    raw_argmax_coords,
    uses_placement,
)
from crossview.models.transformatcher.softargmax import (
    grid_centres,
    normalised_to_pixels,
    pixels_to_normalised,
)
from crossview.models.weights import read_state_dict

WEIGHTS = Path(__file__).resolve().parents[1] / "weights" / "transformatcher_lite0.safetensors"
EVAL_TAU = 0.05
METHODS = ("refined", "raw")
FeatureFn = Callable[[Tensor], list[list[Tensor]]]
# what `crossview eval` scores beside the model: {variant: caption}
VARIANTS = {"raw": "raw correlation: hard arg-max of the channel-mean correlation of the same "
                   "backbone features, no refinement"}


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


def _square(model: TransforMatcher, image: Tensor) -> Tensor:
    """``image [1, 3, H, W]`` resized to the model's square input ``[1, 3, S, S]``."""
    return F.interpolate(image, size=(model.image_size, model.image_size), mode="bilinear",
                         align_corners=False, antialias=True)


def match_pair(model: TransforMatcher, src: Tensor, tgt: Tensor, points: Tensor,
               ) -> tuple[Tensor, Tensor, Tensor]:
    """Images ``[1, 3, Hs, Ws]``, ``[1, 3, Ht, Wt]`` (0..255), source pixel ``points [N, 2]``
    -> ``(transferred [N, 2] target px, flow [2, Hs, Ws], flow_backward [2, Ht, Wt])``."""
    (hs, ws), (ht, wt) = src.shape[-2:], tgt.shape[-2:]
    corr = model.correlation(_square(model, src), _square(model, tgt))
    # target -> source is the same correlation with the two images' axes swapped; both
    # directions are refined as one batch of two.
    forward, backward = model.refine(torch.cat((corr, corr.permute(0, 1, 4, 5, 2, 3))))[
        "coords"].chunk(2)
    shift = model.frame_shift
    return (_transfer(model, forward, points, (hs, ws), (ht, wt)),
            _dense_flow(forward, (hs, ws), (ht, wt), shift),
            _dense_flow(backward, (ht, wt), (hs, ws), shift))


def _transfer(model: TransforMatcher, coords: Tensor, points: Tensor,
              src_size: tuple[int, int], tgt_size: tuple[int, int]) -> Tensor:
    """Source pixel ``points [N, 2]`` through ``coords [1, G, G, 2]`` -> target pixels
    ``[N, 2]`` (soft sampler at the evaluation temperature)."""
    kp = pixels_to_normalised(points, src_size[1], src_size[0])[None]
    return normalised_to_pixels(model.transfer(coords, kp, EVAL_TAU)[0], tgt_size[1],
                                tgt_size[0])


def transfer_keypoints(model: TransforMatcher, src: Tensor, tgt: Tensor, points: Tensor,
                       method: str = "refined", features: FeatureFn | None = None) -> Tensor:
    """Source pixel ``points [N, 2]`` of ``src [1, 3, Hs, Ws]`` -> their target pixels
    ``[N, 2]`` in ``tgt [1, 3, Ht, Wt]`` (0..255), one direction only (no dense flows: what a
    benchmark needs). ``method``: ``"refined"`` (the model) or ``"raw"`` (hard arg-max of the
    channel-mean correlation of the same features, :func:`~.model.raw_argmax_coords`: the
    no-refinement baseline). ``features``: ``image -> model.features(square image)``, e.g. an
    :class:`ImageFeatures` cache (default: computed here)."""
    if method not in METHODS:
        raise ValueError(f"method must be one of {METHODS}, got {method!r}")
    if features is None:
        corr = model.correlation(_square(model, src), _square(model, tgt))
    else:
        corr = model.correlate(features(src), features(tgt))
    coords = (model.refine(corr)["coords"] if method == "refined"
              else raw_argmax_coords(corr, model.upsample))
    return _transfer(model, coords, points, src.shape[-2:], tgt.shape[-2:])


class ImageFeatures:
    """``image [1, 3, H, W] -> model.features(image resized to the model's input)``, kept for
    the last ``capacity`` distinct images (by content). Benchmark pairs reuse their images
    (each PF-WILLOW image is in 18 of its 900 pairs), so the backbones run once per image."""

    def __init__(self, model: TransforMatcher, capacity: int = 128) -> None:
        self.model, self.capacity = model, capacity
        self._kept: OrderedDict[tuple, list[list[Tensor]]] = OrderedDict()

    def __call__(self, image: Tensor) -> list[list[Tensor]]:
        key = (tuple(image.shape), str(image.device), image.dtype,
               hashlib.sha1(image.detach().cpu().numpy().tobytes()).digest())
        if key in self._kept:
            self._kept.move_to_end(key)
        else:
            self._kept[key] = self.model.features(_square(self.model, image))
            if len(self._kept) > self.capacity:
                self._kept.popitem(last=False)
        return self._kept[key]


def flip_tta_keypoints(model: TransforMatcher, src: Tensor, tgt: Tensor, points: Tensor,
                       method: str = "refined") -> Tensor:
    """Flip-consistency at test time: the mean of :func:`transfer_keypoints` on the pair and
    on the pair mirrored left-right (its answer mirrored back); arguments and result as
    :func:`transfer_keypoints` (twice its cost)."""
    mirrored = points.clone()
    mirrored[:, 0] = src.shape[-1] - 1 - points[:, 0]
    back = transfer_keypoints(model, src.flip(-1), tgt.flip(-1), mirrored, method)
    back[:, 0] = tgt.shape[-1] - 1 - back[:, 0]
    return (transfer_keypoints(model, src, tgt, points, method) + back) / 2


def keypoint_predictor(model: TransforMatcher, device: str = "cpu", precision: str = "fp32",
                       variant: str | None = None) -> Callable[[Mapping[str, Any]], np.ndarray]:
    """A ``crossview.eval`` predictor for semantic samples: transfers ``keypoints0`` of
    ``image0`` into ``image1`` on ``device``; returns ``[N, 2]`` target pixels (invalid rows are
    ignored by the PCK metrics). TransforMatcher runs in ``precision="fp32"`` only.
    ``variant``: ``None`` (the model) or ``"raw"`` (see :func:`transfer_keypoints`). The
    backbone features of the images it has seen are kept (:class:`ImageFeatures`)."""
    if precision != "fp32":
        raise UserError(f"TransforMatcher runs in fp32 only, not precision {precision!r}")
    method = "refined" if variant is None else variant
    if method not in METHODS:
        raise ValueError(f"variant must be None or one of {METHODS[1:]}, got {variant!r}")
    model.eval()
    features = ImageFeatures(model)

    def predict(sample: Mapping[str, Any]) -> np.ndarray:
        src, tgt = (sample_image(sample[k]).to(device) for k in ("image0", "image1"))
        points = torch.from_numpy(np.asarray(sample["keypoints0"], np.float32)).to(device)
        with torch.inference_mode():
            return transfer_keypoints(model, src, tgt, points, method, features).cpu().numpy()

    return predict
