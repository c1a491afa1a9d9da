"""The user-facing functions: load a model of any family, estimate disparity or optical flow,
transfer keypoints.

Images may be paths, PIL images, ``[H, W, 3]`` uint8 numpy arrays or float tensors
``[B, 3, H, W]`` with values 0..255 (see ``docs/conventions.md``). Disparity and flow run
MatchStereo / MatchFlow (:mod:`crossview.models.matchstereo.inference`: padding to a multiple
of 32, fixed-resolution and low-resolution-initialised inference), keypoint transfer
TransforMatcher (:mod:`crossview.models.transformatcher.inference`).

Example (the bundled default stereo model on a random pair):
    >>> import torch, crossview
    >>> left = torch.rand(1, 3, 128, 160) * 255
    >>> result = crossview.estimate_disparity(left, left.roll(-4, dims=3))
    >>> result.disparity.shape  # [B, H, W] pixels, left view; result.valid is the noc mask
    torch.Size([1, 128, 160])
    >>> "matchstereo-hybrid" in crossview.list_models("stereo")
    True
"""

from __future__ import annotations

import os
import warnings
from dataclasses import dataclass
from importlib import metadata
from typing import Any

import numpy as np
import torch
from torch import nn

from crossview.data import io
from crossview.data.calibration import write_stereo_calibration
from crossview.data.image_batch import ImageLike
from crossview.data.image_batch import as_image_batch as as_image_batch
from crossview.data.rig_calibration import RigCalibration, read_rig_calibration
from crossview.device import resolve_device
from crossview.errors import UserError
from crossview.geometry.confidence import field_confidence
from crossview.geometry.disparity import field_to_disparity
from crossview.geometry.rectification import RectifiedPair, rectify_pair
from crossview.models import published, registry
from crossview.models.defaults import DEFAULT_FLOW_MODEL, DEFAULT_STEREO_MODEL
from crossview.models.matchstereo.inference import CONSISTENCY_THRESHOLD, Fields, predict_fields
from crossview.models.matchstereo.inference import check_memory as check_memory
from crossview.models.registry import Predictor
from crossview.models.transformatcher.inference import match_pair
from crossview.output import staged_files

ESTIMATORS = {"stereo": "estimate_disparity", "flow": "estimate_flow"}


class RandomWeightsWarning(UserWarning):
    """A model runs with random weights: its output is meaningless."""


def list_models(task: str | None = None) -> list[str]:
    """Names :func:`load_model` accepts (of ``task`` only: ``"stereo"``, ``"flow"``,
    ``"semantic"``, ``"novel-view"``)."""
    return registry.list_models(task)


@dataclass(frozen=True)
class ModelInfo:
    """What ``crossview models`` lists about a registered model.

    Attributes:
        name, task: as registered.
        parameters: the network's parameter count (its frozen features, held as buffers, are
            not counted).
        weights: its default weights: ``"bundled"`` (shipped in the package), ``"published,
            in the cache"`` / ``"published, not downloaded"`` (its authors' checkpoint, see
            ``crossview weights``) or ``"none"`` (random weights).
        licence: the licence of those weights where crossview knows it (the bundled ones are
            the package's), else ``None``.
    """

    name: str
    task: str
    parameters: int
    weights: str
    licence: str | None


def model_info(name: str) -> ModelInfo:
    """:class:`ModelInfo` of the registered model ``name`` (built on the meta device: nothing
    is allocated or read but the bundled frozen features some models build from)."""
    spec = registry.get_spec(name)
    licence = None
    if spec.weights_path is not None:
        weights, licence = "bundled", _package_licence()
    elif spec.published is not None:
        weights = "published, " + ("in the cache" if published.cached_path(
            spec.published).is_file() else "not downloaded")
    else:
        weights = "none"
    parameters = sum(p.numel() for p in spec.skeleton().parameters())
    return ModelInfo(spec.name, spec.task, parameters, weights, licence)


def _package_licence() -> str | None:
    """The licence crossview is distributed under (``None`` when run from a source tree that
    is not installed, which has no package metadata)."""
    try:
        return metadata.metadata("crossview").get("License")
    except metadata.PackageNotFoundError:
        return None


def model_task(name: str) -> str:
    """What the registered model ``name`` estimates (:class:`UserError` for unknown names)."""
    return registry.get_spec(name).task


def load_model(name: str = DEFAULT_STEREO_MODEL, weights: str | os.PathLike | None = None, *,
               device: str | torch.device = "cpu", download: bool = False,
               **overrides: Any) -> nn.Module:
    """Build a registered model and load its weights.

    Args:
        name: one of :func:`list_models` (``matchstereo-t/-s/-b``, ``matchflow-b``, the bundled
            ``matchstereo-hybrid``, ``transformatcher``, ``multiview``, ...).
        weights: ``None`` (the default): the weights bundled for ``name`` if it has some
            (``matchstereo-mini``, the hybrids, ``transformatcher``), else its published ones
            (as ``"published"``), else none (random, see below). ``"published"``: the
            checkpoint the model's authors publish (``matchstereo-t/-s/-b``, ``matchflow-b``),
            from the local cache (:mod:`crossview.models.published`). Else a path: a
            published ``.pth`` checkpoint (``{"model": state_dict}``), a bare state dict file
            or ``.safetensors``. Keys and shapes must match exactly
            (:class:`~crossview.errors.UserError` otherwise).
        device: where the model lives (checked by :func:`crossview.device.resolve_device`).
        download: fetch the published checkpoint into the cache if it is not there yet (the
            only way crossview touches the network); without it a missing checkpoint is a
            :class:`~crossview.errors.UserError` naming the URL and where to put the file.
        overrides: fields of the family's configuration to change (MatchStereo:
            ``MatchStereoConfig`` fields such as ``decoder_layers=(1, 1, 1, 1)``;
            TransforMatcher: its constructor's options), each checked like the field.

    A model with neither bundled nor published weights (``multiview``) is randomly initialised
    and a :class:`RandomWeightsWarning` says that its output is meaningless;
    ``model.weights_source`` is ``None`` then (else the weights path). :func:`build_model`
    gives any model randomly initialised, on purpose and without a warning.
    ``model.model_name`` is the registered name, ``model.task`` its task,
    ``model.refine_by_default`` whether its dense inference refines photometrically.
    """
    spec = registry.get_spec(name)
    path = spec.weights_file(weights, download=download)
    if path is None:
        warnings.warn(f"{spec.name} has no weights (pass weights=...): it runs with random "
                      "weights and its output is meaningless", RandomWeightsWarning, stacklevel=2)
    return _registered(spec.create(path, **overrides), spec, path).to(resolve_device(device))


def build_model(name: str, **overrides: Any) -> nn.Module:
    """The registered model ``name`` randomly initialised, whatever weights it ships (speed
    benchmarks, training from scratch); ``overrides`` as in :func:`load_model`."""
    spec = registry.get_spec(name)
    return _registered(spec.build(**overrides), spec, None)


def _registered(model: nn.Module, spec: registry.ModelSpec, path: str | os.PathLike | None
                ) -> nn.Module:
    """``model`` marked as built from ``spec`` with the weights of ``path``; in eval mode."""
    model.weights_source = None if path is None else str(path)
    model.model_name, model.task = spec.name, spec.task
    model.refine_by_default = spec.refine
    model.lri_by_default = spec.lri
    return model.eval()


def predictor(model: nn.Module, *, device: str = "cpu", precision: str = "fp32") -> Predictor:
    """The ``sample -> prediction`` callable that :func:`crossview.eval.evaluate` runs for a
    model from :func:`load_model` (its family's, see
    :attr:`crossview.models.registry.ModelSpec.predictor`)."""
    spec = registry.get_spec(model.model_name)
    if spec.predictor is None:
        raise UserError(f"model {spec.name!r} has no benchmark predictor: no benchmark scores "
                        f"{spec.task} models")
    return spec.predictor(model, device, precision)


@dataclass
class StereoResult:
    """Disparities (positive px) ``[B, H, W]`` of the left and right views, their left-right
    consistency (non-occlusion) masks ``[B, H, W]`` bool, and the self relative positions at
    full resolution ``[B, H, W, 2]`` (px; where each pixel draws its information from), and a
    per-pixel confidence ``[B, H, W]`` in [0, 1] of each view
    (:mod:`crossview.geometry.confidence`: left-right consistency and attention peak)."""

    disparity: torch.Tensor
    disparity_right: torch.Tensor
    valid: torch.Tensor
    valid_right: torch.Tensor
    self_rpos: torch.Tensor
    self_rpos_right: torch.Tensor
    confidence: torch.Tensor
    confidence_right: torch.Tensor


@dataclass
class FlowResult:
    """Forward flow (frame 0 -> 1) and backward flow ``[B, 2, H, W]`` (x, y px), their
    forward-backward consistency masks ``[B, H, W]`` bool, the self relative positions
    ``[B, H, W, 2]`` (px) of both frames and their confidence ``[B, H, W]`` in [0, 1]
    (:mod:`crossview.geometry.confidence`: forward-backward consistency and attention peak)."""

    flow: torch.Tensor
    flow_backward: torch.Tensor
    valid: torch.Tensor
    valid_backward: torch.Tensor
    self_rpos: torch.Tensor
    self_rpos_backward: torch.Tensor
    confidence: torch.Tensor
    confidence_backward: torch.Tensor


def estimate_disparity(left: ImageLike, right: ImageLike, *,
                       model: str | nn.Module = DEFAULT_STEREO_MODEL,
                       weights: str | os.PathLike | None = None, device: str = "cpu",
                       precision: str = "fp32", lri: bool | None = None,
                       size: tuple[int, int] | None = None,
                       threshold: float = CONSISTENCY_THRESHOLD,
                       refine: bool | None = None, min_confidence: float = 0.0) -> StereoResult:
    """Disparity of both views of a rectified stereo pair.

    Args:
        left, right: the pair (see the module docstring), same size.
        model: a name (loaded with ``weights``) or a model from :func:`load_model`; the model
            is moved to ``device``.
        precision: ``"fp32"``, ``"bf16"`` or ``"fp16"`` (autocast; fields stay float32).
        lri: low-resolution initialisation: a half-resolution pass gives the initial field;
            ``None``: the model's default (``model.lri_by_default``: on for the bundled
            ``matchstereo-hybrid``, where it was chosen on held-out real scenes).
        size: fixed-resolution inference ``(H, W)``: run at that size, resize back.
        threshold: left-right consistency threshold in px for ``valid``.
        refine: polish both fields photometrically
            (:mod:`crossview.geometry.photometric_refinement`); ``None``: the model's default
            (``model.refine_by_default``: on for crossview's hybrid models, off for the
            published ones).
        min_confidence: pixels whose confidence is below this (in [0, 1]) are not ``valid``
            either (0: the consistency mask alone).

    Returns:
        :class:`StereoResult` (float32 tensors on ``device``).
    """
    check_min_confidence(min_confidence)
    field, rpos, valid, peak = _predict(model, weights, left, right, "stereo", device=device,
                                        precision=precision, lri=lri, size=size,
                                        threshold=threshold, refine=refine)
    b = field.shape[0] // 2
    confidence = field_confidence(field, peak)
    valid = valid & (confidence >= min_confidence)
    return StereoResult(field_to_disparity(field[:b]), field_to_disparity(field[b:], "right"),
                        valid[:b], valid[b:], rpos[:b], rpos[b:], confidence[:b], confidence[b:])


def estimate_flow(img0: ImageLike, img1: ImageLike, *, model: str | nn.Module = DEFAULT_FLOW_MODEL,
                  weights: str | os.PathLike | None = None, device: str = "cpu",
                  precision: str = "fp32", lri: bool | None = None,
                  size: tuple[int, int] | None = None,
                  threshold: float = CONSISTENCY_THRESHOLD,
                  refine: bool | None = None, min_confidence: float = 0.0) -> FlowResult:
    """Optical flow between two frames, both directions; arguments as :func:`estimate_disparity`.

    Returns:
        :class:`FlowResult` (float32 tensors on ``device``).
    """
    check_min_confidence(min_confidence)
    field, rpos, valid, peak = _predict(model, weights, img0, img1, "flow", device=device,
                                        precision=precision, lri=lri, size=size,
                                        threshold=threshold, refine=refine)
    b = field.shape[0] // 2
    flow, confidence = field.permute(0, 3, 1, 2), field_confidence(field, peak)
    valid = valid & (confidence >= min_confidence)
    return FlowResult(flow[:b], flow[b:], valid[:b], valid[b:], rpos[:b], rpos[b:],
                      confidence[:b], confidence[b:])


def check_min_confidence(min_confidence: float, name: str = "min_confidence") -> None:
    """A :class:`UserError` naming ``name`` unless ``min_confidence`` lies in [0, 1]
    (confidences do)."""
    if not 0 <= min_confidence <= 1:
        raise UserError(f"{name} must be in [0, 1] (a confidence), got {min_confidence:g}")


def _predict(model: str | nn.Module, weights: str | os.PathLike | None, img0: ImageLike,
             img1: ImageLike, task: str, *, device: str, precision: str, lri: bool | None,
             size: tuple[int, int] | None, threshold: float, refine: bool | None) -> Fields:
    """Full-resolution fields, self relative positions, mask and attention peak
    (:class:`~crossview.models.matchstereo.inference.Fields`)."""
    target = resolve_device(device)
    if isinstance(model, str):
        model = load_model(model, weights, device=target)
    _check_task(model, task)
    return predict_fields(model, img0, img1, task, device=target, precision=precision, lri=lri,
                          size=size, threshold=threshold, refine=refine)


def _check_task(model: nn.Module, task: str) -> None:
    """A stereo model cannot estimate flow, nor the other way round (same architecture,
    weights trained for one task)."""
    model_task = getattr(model, "task", None)
    if model_task is not None and model_task != task:
        name = getattr(model, "model_name", type(model).__name__)
        raise UserError(f"model {name!r} estimates {model_task}; {ESTIMATORS[task]} needs a "
                        f"{task} model")


# ------------------------------------------------------------------------------- rectification


def rectify_stereo(left: str | os.PathLike | np.ndarray, right: str | os.PathLike | np.ndarray,
                   calibration: str | os.PathLike | RigCalibration, *,
                   alpha: float = 0.0) -> RectifiedPair:
    """Rectify an unrectified stereo pair with OpenCV (``pip install 'crossview[baselines]'``)
    so that :func:`estimate_disparity` and depth work on it.

    Args:
        left, right: image paths or ``[H, W, 3]`` uint8 arrays, of the calibration's size.
        calibration: a rig calibration file (OpenCV / plain YAML or JSON with ``K1``, ``D1``,
            ``K2``, ``D2``, ``R``, ``T`` in metres and ``image_size``, or a KITTI raw
            ``calib_cam_to_cam.txt``; :mod:`crossview.data.rig_calibration`) or a
            :class:`~crossview.data.rig_calibration.RigCalibration`.
        alpha: 0 keeps only pixels seen in both images, 1 every source pixel
            (:mod:`crossview.geometry.rectification`).

    Returns:
        :class:`~crossview.geometry.rectification.RectifiedPair`: both rectified images and
        their :class:`~crossview.data.calibration.StereoCalibration` (focal, baseline, doffs,
        principal point, size).
    """
    rig = calibration if isinstance(calibration, RigCalibration) else read_rig_calibration(
        calibration)
    images = [image if isinstance(image, np.ndarray) else io.read_image(image)
              for image in (left, right)]
    return rectify_pair(*images, rig, alpha=alpha)


RECTIFIED_FILES = ("left.png", "right.png", "calib.txt")


def write_rectified(pair: RectifiedPair, folder: str | os.PathLike) -> list[str]:
    """Write ``pair`` into ``folder`` as ``left.png``, ``right.png`` and ``calib.txt`` (a
    Middlebury calibration file, which ``crossview stereo --calib`` reads), all or nothing
    (:func:`crossview.output.staged_files`). Returns the three paths."""
    paths = [os.path.join(folder, name) for name in RECTIFIED_FILES]
    with staged_files(paths) as (left, right, calib):
        io.write_image(left, pair.left)
        io.write_image(right, pair.right)
        write_stereo_calibration(calib, pair.calibration)
    return paths


# ----------------------------------------------------------------------------- semantic matching


@dataclass
class MatchResult:
    """Keypoints transferred from a source to a target image by TransforMatcher.

    ``points [N, 2]``: the source keypoints, ``transferred [N, 2]``: their matches in the
    target, both pixel ``(x, y)`` of the original images; ``flow [2, Hs, Ws]``: dense
    source -> target displacement (px); ``flow_backward [2, Ht, Wt]``: target -> source."""

    points: torch.Tensor
    transferred: torch.Tensor
    flow: torch.Tensor
    flow_backward: torch.Tensor


def match_keypoints(src: ImageLike, tgt: ImageLike, points: torch.Tensor | np.ndarray | None = None,
                    *, model: nn.Module | None = None, weights: str | os.PathLike | None = None,
                    device: str = "cpu") -> MatchResult:
    """Transfer ``points`` (pixel ``(x, y)`` ``[N, 2]`` in ``src``) to ``tgt`` (semantic
    correspondence between two instances of a category; the images may differ in size).

    ``model``: a :class:`~crossview.models.transformatcher.TransforMatcher`; default:
    ``load_model("transformatcher", weights)`` (the bundled weights unless ``weights``).
    Without ``points``, an 8 x 8 grid over the source. Both images are resized to the model's
    square input (240 x 240) as in the paper; the results are mapped back to the original pixel
    frames.
    """
    target = resolve_device(device)
    if model is None:
        model = load_model("transformatcher", weights)
    x0, x1 = as_image_batch(src, "source image"), as_image_batch(tgt, "target image")
    if x0.shape[0] != 1 or x1.shape[0] != 1:
        raise UserError("match_keypoints takes one source and one target image")
    h0, w0 = x0.shape[-2:]
    if points is None:
        ys, xs = torch.meshgrid(torch.linspace(0.1, 0.9, 8) * (h0 - 1),
                                torch.linspace(0.1, 0.9, 8) * (w0 - 1), indexing="ij")
        points = torch.stack((xs, ys), -1).reshape(-1, 2)
    points = torch.as_tensor(points, dtype=torch.float32)
    if points.ndim != 2 or points.shape[1] != 2 or len(points) == 0:
        raise UserError(f"points must be a non-empty list of (x, y), got shape "
                        f"{tuple(points.shape)}")
    if not torch.isfinite(points).all():
        x, y = points[(~torch.isfinite(points)).any(1).nonzero()[0, 0]].tolist()
        raise UserError(f"point ({x:g}, {y:g}) is not finite: points must be pixel (x, y) "
                        "numbers")
    outside = (points[:, 0] < 0) | (points[:, 0] > w0 - 1) | (points[:, 1] < 0) | (
        points[:, 1] > h0 - 1)
    if outside.any():
        x, y = points[outside.nonzero()[0, 0]].tolist()
        raise UserError(f"point ({x:g}, {y:g}) lies outside the source image "
                        f"({w0}x{h0} px, x in 0..{w0 - 1}, y in 0..{h0 - 1})")
    model = model.to(target).eval()
    with torch.inference_mode():
        out = match_pair(model, x0.to(target), x1.to(target), points.to(target))
    return MatchResult(points, *(t.cpu() for t in out))
