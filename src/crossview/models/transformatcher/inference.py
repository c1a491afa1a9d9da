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
from torch import Tensor

from crossview.data.image_batch import sample_image
from crossview.errors import UserError
from crossview.models.keypoints.inference import square, transfer_points
from crossview.models.transformatcher.model import (
    TASK,
    TransforMatcher,
    raw_argmax_coords,
    uses_placement,
)
from crossview.models.weights import read_state_dict

WEIGHTS = Path(__file__).resolve().parents[1] / "weights" / "transformatcher_lite0.safetensors"
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
        corr = model.correlation(square(model, src), square(model, tgt))
    else:
        corr = model.correlate(features(src), features(tgt))
    coords = (model.refine(corr)["coords"] if method == "refined"
              else raw_argmax_coords(corr, model.upsample))
    return transfer_points(model, coords, points, src.shape[-2:], tgt.shape[-2:])


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
            self._kept[key] = self.model.features(square(self.model, image))
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
