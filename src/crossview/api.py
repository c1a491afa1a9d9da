"""The user-facing functions: load a model, estimate disparity or optical flow.

Images may be paths, PIL images, ``[H, W, 3]`` uint8 numpy arrays or float tensors
``[B, 3, H, W]`` with values 0..255 (see ``docs/conventions.md``). Inputs are padded to a
multiple of 32 by edge replication (height on the top, width on the right, as the published
MatchStereo inference does) and the outputs cropped back.

Example:
    >>> import crossview
    >>> model = crossview.load_model("matchstereo-t", weights="matchstereo_tiny_fsd.pth")
    >>> result = crossview.estimate_disparity("left.png", "right.png", model=model)
    >>> result.disparity.shape  # [B, H, W] pixels, left view; result.valid is the noc mask
"""

from __future__ import annotations

import contextlib
import numbers
import os
import warnings
from dataclasses import dataclass

import numpy as np
import torch
import torch.nn.functional as F
from PIL import Image
from torch import nn

from crossview import memory
from crossview.data.io import read_image
from crossview.device import resolve_device
from crossview.errors import UserError
from crossview.geometry.consistency import noc_mask
from crossview.models import registry
from crossview.models.defaults import DEFAULT_FLOW_MODEL, DEFAULT_STEREO_MODEL
from crossview.models.weights import load_weights

ImageLike = str | os.PathLike | Image.Image | np.ndarray | torch.Tensor
PRECISIONS = {"fp32": torch.float32, "bf16": torch.bfloat16, "fp16": torch.float16}
CONSISTENCY_THRESHOLD = 8.0  # px, as the published inference script
# Fixed-resolution inference also holds full-size tensors besides the run: the float images,
# their resized copies, and the fields and self relative positions resized back (measured: 131
# B per input pixel for size=(256, 256) on 3008x3008, see crossview.models.matchstereo.memory).
RESIZE_BYTES_PER_PIXEL = 150
ESTIMATORS = {"stereo": "estimate_disparity", "flow": "estimate_flow"}


class RandomWeightsWarning(UserWarning):
    """A model runs with random weights: its output is meaningless."""


def list_models() -> list[str]:
    """Names :func:`load_model` accepts."""
    return registry.list_models()


def load_model(name: str = DEFAULT_STEREO_MODEL, weights: str | os.PathLike | None = None, *,
               device: str | torch.device = "cpu") -> nn.Module:
    """Build a registered model and load its weights.

    Args:
        name: one of :func:`list_models` (``matchstereo-t/-s/-b``, ``matchflow-b``, ...).
        weights: a published ``.pth`` checkpoint (``{"model": state_dict}``), a bare state dict
            file or ``.safetensors``; default: the weights bundled for ``name``, if any. Keys
            and shapes must match exactly (:class:`~crossview.errors.UserError` otherwise).
        device: where the model lives (checked by :func:`crossview.device.resolve_device`).

    Without weights the model is randomly initialised and a :class:`RandomWeightsWarning`
    says that its output is meaningless; ``model.weights_source`` is ``None`` then (else the
    weights path).
    """
    spec = registry.get_spec(name)
    model = spec.build()
    path = weights if weights is not None else spec.weights_path
    if path is None:
        warnings.warn(f"{spec.name} has no weights (pass weights=...): it runs with random "
                      "weights and its output is meaningless", RandomWeightsWarning, stacklevel=2)
    else:
        load_weights(model, path)
    model.weights_source = None if path is None else str(path)
    model.model_name = spec.name
    return model.eval().to(resolve_device(device))


@dataclass
class StereoResult:
    """Disparities (positive px) ``[B, H, W]`` of the left and right views, their left-right
    consistency (non-occlusion) masks ``[B, H, W]`` bool, and the self relative positions at
    full resolution ``[B, H, W, 2]`` (px; where each pixel draws its information from)."""

    disparity: torch.Tensor
    disparity_right: torch.Tensor
    valid: torch.Tensor
    valid_right: torch.Tensor
    self_rpos: torch.Tensor
    self_rpos_right: torch.Tensor


@dataclass
class FlowResult:
    """Forward flow (frame 0 -> 1) and backward flow ``[B, 2, H, W]`` (x, y px), their
    forward-backward consistency masks ``[B, H, W]`` bool, and the self relative positions
    ``[B, H, W, 2]`` (px) of both frames."""

    flow: torch.Tensor
    flow_backward: torch.Tensor
    valid: torch.Tensor
    valid_backward: torch.Tensor
    self_rpos: torch.Tensor
    self_rpos_backward: torch.Tensor


def estimate_disparity(left: ImageLike, right: ImageLike, *,
                       model: str | nn.Module = DEFAULT_STEREO_MODEL,
                       weights: str | os.PathLike | None = None, device: str = "cpu",
                       precision: str = "fp32", lri: bool = False,
                       size: tuple[int, int] | None = None,
                       threshold: float = CONSISTENCY_THRESHOLD) -> StereoResult:
    """Disparity of both views of a rectified stereo pair.

    Args:
        left, right: the pair (see the module docstring), same size.
        model: a name (loaded with ``weights``) or a model from :func:`load_model`; the model
            is moved to ``device``.
        precision: ``"fp32"``, ``"bf16"`` or ``"fp16"`` (autocast; fields stay float32).
        lri: low-resolution initialisation: a half-resolution pass gives the initial field.
        size: fixed-resolution inference ``(H, W)``: run at that size, resize back.
        threshold: left-right consistency threshold in px for ``valid``.

    Returns:
        :class:`StereoResult` (float32 tensors on ``device``).
    """
    field, rpos, valid = _predict(model, weights, left, right, "stereo", device=device,
                                  precision=precision, lri=lri, size=size, threshold=threshold)
    b = field.shape[0] // 2
    return StereoResult((-field[:b, ..., 0]).clamp(min=0), field[b:, ..., 0].clamp(min=0),
                        valid[:b], valid[b:], rpos[:b], rpos[b:])


def estimate_flow(img0: ImageLike, img1: ImageLike, *, model: str | nn.Module = DEFAULT_FLOW_MODEL,
                  weights: str | os.PathLike | None = None, device: str = "cpu",
                  precision: str = "fp32", lri: bool = False, size: tuple[int, int] | None = None,
                  threshold: float = CONSISTENCY_THRESHOLD) -> FlowResult:
    """Optical flow between two frames, both directions; arguments as :func:`estimate_disparity`.

    Returns:
        :class:`FlowResult` (float32 tensors on ``device``).
    """
    field, rpos, valid = _predict(model, weights, img0, img1, "flow", device=device,
                                  precision=precision, lri=lri, size=size, threshold=threshold)
    b = field.shape[0] // 2
    flow = field.permute(0, 3, 1, 2)
    return FlowResult(flow[:b], flow[b:], valid[:b], valid[b:], rpos[:b], rpos[b:])


def as_image_batch(image: ImageLike, name: str = "image") -> torch.Tensor:
    """Any accepted image form as a float32 tensor ``[B, 3, H, W]`` with values 0..255.

    ``name`` says which argument it is in errors: ``TypeError``/``ValueError`` for a wrong
    form, an empty image or (tensors) NaN or infinite values."""
    if isinstance(image, str | os.PathLike):
        image = read_image(image)
    if isinstance(image, Image.Image):
        image = np.asarray(image.convert("RGB"))
    if isinstance(image, np.ndarray):
        if image.dtype != np.uint8 or image.ndim != 3 or image.shape[2] != 3:
            raise TypeError(f"{name} as a numpy array must be [H, W, 3] uint8, got "
                            f"{image.shape=} {image.dtype=}")
        batch = torch.from_numpy(image.copy()).permute(2, 0, 1)[None].float()
    elif isinstance(image, torch.Tensor):
        if image.ndim != 4 or image.shape[1] != 3 or not image.is_floating_point():
            raise ValueError(f"{name} as a tensor must be float [B, 3, H, W] (0..255), got "
                             f"{image.shape=} {image.dtype=}")
        batch = image.float()
        if batch.numel() and torch.isnan(batch).any():
            raise ValueError(f"{name} holds NaN values")
        if batch.numel() and torch.isinf(batch).any():
            raise ValueError(f"{name} holds infinite values")
    else:
        raise TypeError(f"{name} must be a path, PIL image, numpy array or tensor, got "
                        f"{type(image).__name__}")
    if batch.numel() == 0:
        raise ValueError(f"{name} is empty: shape {list(batch.shape)} ([B, 3, H, W])")
    return batch


def check_memory(model: nn.Module, height: int, width: int, *, task: str, batch: int = 1,
                 lri: bool = False, size: tuple[int, int] | None = None,
                 device: str | torch.device = "cpu", advice: str | None = None) -> int | None:
    """Refuse (:class:`UserError`) an :func:`estimate_disparity` / :func:`estimate_flow` call
    on ``batch`` pairs of ``height x width`` px that needs more memory than ``device`` has
    (:func:`crossview.memory.available_memory`), before anything is allocated.

    The estimate is the model's own (``model.inference_bytes(batch, H, W, task)`` at the padded
    run size, calibrated in :mod:`crossview.models.matchstereo.memory`), plus that of the
    half-resolution pass with ``lri`` (measured at 1024x1024: 34 % above the plain run), plus
    :data:`RESIZE_BYTES_PER_PIXEL` per input pixel with ``size``. ``advice`` replaces the
    default hint (the CLI names its options). Returns the estimate in bytes (``None`` for
    models that cannot estimate, which are not checked).
    """
    estimate = getattr(model, "inference_bytes", None)
    if estimate is None:
        return None
    run_h, run_w = size if size is not None else (height, width)
    needed = estimate(batch, _ceil32(run_h), _ceil32(run_w), task)
    if lri:
        needed += estimate(batch, _ceil32(run_h // 2), _ceil32(run_w // 2), task)
    if size is not None:
        needed += RESIZE_BYTES_PER_PIXEL * batch * height * width
    run = f"{run_h}x{run_w} px" + (f" (images of {height}x{width} px resized)"
                                    if size is not None else "")
    what = f"{getattr(model, 'model_name', type(model).__name__)} at {run}" + (
        f", batch {batch}" if batch > 1 else "")
    memory.check_memory(needed, what, advice or "pass a smaller size=(H, W) (fixed-resolution "
                        "inference) or smaller images", resolve_device(device))
    return needed


def _predict(model: str | nn.Module, weights: str | os.PathLike | None, img0: ImageLike,
             img1: ImageLike, task: str, *, device: str, precision: str, lri: bool,
             size: tuple[int, int] | None, threshold: float,
             ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Full-resolution field and self relative positions ``[2B, H, W, 2]`` and the mask."""
    target = resolve_device(device)
    if isinstance(model, str):
        model = load_model(model, weights, device=target)
    _check_task(model, task)
    dtype = PRECISIONS.get(precision)
    if dtype is None:
        raise UserError(f"unknown precision {precision!r}; choose one of {', '.join(PRECISIONS)}")
    size = _run_size(size)
    x0, x1 = as_image_batch(img0, "first image"), as_image_batch(img1, "second image")
    if x0.shape[0] != x1.shape[0]:
        raise UserError(f"the two images differ in batch size: the first holds {x0.shape[0]} "
                        f"images, the second {x1.shape[0]} ([B, 3, H, W])")
    if x0.shape != x1.shape:
        raise UserError(f"the two images differ in size: {tuple(x0.shape[-2:])} and "
                        f"{tuple(x1.shape[-2:])} (H, W)")
    check_memory(model, *x0.shape[-2:], task=task, batch=x0.shape[0], lri=lri, size=size,
                 device=target)
    model.to(target)
    x0, x1 = x0.to(target), x1.to(target)
    autocast = (torch.autocast(target.type, dtype=dtype) if dtype != torch.float32
                else contextlib.nullcontext())
    with torch.inference_mode(), autocast:
        if size is None:
            field, rpos = _run(model, x0, x1, task, lri)
        else:
            field, rpos = _run_fixed(model, x0, x1, task, lri, size)
    field, rpos = field.float(), rpos.float()
    return field, rpos, noc_mask(field, threshold)


def _check_task(model: nn.Module, task: str) -> None:
    """A stereo model cannot estimate flow, nor the other way round (same architecture,
    weights trained for one task)."""
    model_task = getattr(model, "task", None)
    if model_task is not None and model_task != task:
        name = getattr(model, "model_name", type(model).__name__)
        raise UserError(f"model {name!r} estimates {model_task}; {ESTIMATORS[task]} needs a "
                        f"{task} model")


def _run_size(size: object) -> tuple[int, int] | None:
    """``size`` checked: ``None`` or ``(H, W)``, two positive ints."""
    if size is None:
        return None
    if (not isinstance(size, tuple | list) or len(size) != 2
            or not all(isinstance(v, numbers.Integral) and not isinstance(v, bool)
                       for v in size)):
        raise TypeError(f"size must be (H, W), two ints, got {size!r}")
    if min(size) < 1:
        raise ValueError(f"size must be positive (H, W), got {tuple(size)}")
    return int(size[0]), int(size[1])


def _run_fixed(model: nn.Module, x0: torch.Tensor, x1: torch.Tensor, task: str, lri: bool,
               size: tuple[int, int]) -> tuple[torch.Tensor, torch.Tensor]:
    """Fixed-resolution inference: resize to ``size``, run, resize the fields back, rescale."""
    h, w = x0.shape[-2:]
    _check_size(model, *size, task, f"size={size} is")
    field, rpos = _run(model, _resize(x0, size), _resize(x1, size), task, lri)
    gain = torch.tensor([w / size[1], h / size[0]], device=field.device, dtype=field.dtype)
    return _resize_field(field, (h, w)) * gain, _resize_field(rpos, (h, w)) * gain


def _run(model: nn.Module, x0: torch.Tensor, x1: torch.Tensor, task: str,
         lri: bool) -> tuple[torch.Tensor, torch.Tensor]:
    """One padded pass (two with ``lri``); fields cropped to the input size."""
    h, w = x0.shape[-2:]
    init = None
    if lri:
        half = (h // 2, w // 2)
        coarse, _ = _run(model, _resize(x0, half), _resize(x1, half), task, lri=False)
        init = _resize_field(coarse, (_ceil32(h) // 32, _ceil32(w) // 32)) * (2 / 32)
    _check_size(model, h, w, task)
    out = model.forward_fields(_pad(x0), _pad(x1), task=task, init_field=init)
    return _crop(out["field"], h, w), _crop(out["self_rpos_up"], h, w)


def _check_size(model: nn.Module, h: int, w: int, task: str, subject: str = "") -> None:
    """:class:`UserError` ``"{subject} too small ..."`` (default subject: the images)."""
    least_h, least_w = model.config.min_shape(task)
    if _ceil32(h) < least_h or _ceil32(w) < least_w:
        subject = subject or f"images of {h}x{w} px are"
        raise UserError(f"{subject} too small: the model needs at least "
                        f"{least_h - 31}x{least_w - 31} px (HxW) for {task} (padded to "
                        f"multiples of 32, >= {least_h}x{least_w})")


def _ceil32(n: int) -> int:
    return -(-n // 32) * 32


def _pad(x: torch.Tensor) -> torch.Tensor:
    """Edge-replicate ``[B, 3, H, W]`` to multiples of 32: height on the top, width right."""
    h, w = x.shape[-2:]
    return F.pad(x, (0, _ceil32(w) - w, _ceil32(h) - h, 0), mode="replicate")


def _crop(field: torch.Tensor, h: int, w: int) -> torch.Tensor:
    """Undo :func:`_pad` on a channel-last ``[N, Hp, Wp, 2]`` field."""
    return field[:, field.shape[1] - h:, :w]


def _resize(x: torch.Tensor, size: tuple[int, int]) -> torch.Tensor:
    return F.interpolate(x, size=size, mode="bilinear", align_corners=True)


def _resize_field(field: torch.Tensor, size: tuple[int, int]) -> torch.Tensor:
    """Bilinear (``align_corners=True``) resize of ``[N, h, w, 2]``; values unchanged."""
    return _resize(field.permute(0, 3, 1, 2), size).permute(0, 2, 3, 1)


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

    ``model``: a :class:`~crossview.models.transformatcher.TransforMatcher`; default: built
    with the bundled weights (or ``weights``). Without ``points``, an 8 x 8 grid over the source.
    Both images are resized to the model's square input (240 x 240) as in the paper; the
    results are mapped back to the original pixel frames.
    """
    from crossview.models.transformatcher import load_transformatcher, match_pair

    target = resolve_device(device)
    if model is None:
        model = load_transformatcher(weights)
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
