"""The user-facing functions: load a model of any family, estimate disparity or optical flow,
transfer keypoints.

Images may be paths, PIL images, ``[H, W, 3]`` uint8 numpy arrays or float tensors
``[B, 3, H, W]`` with values 0..255 (see ``docs/conventions.md``). Disparity and flow run
MatchStereo / MatchFlow (:mod:`crossview.models.dense.inference`: padding to a multiple
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

import json
import logging
import os
import threading
import warnings
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass
from importlib import metadata
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import torch
from torch import nn

from crossview import distributed as process_group
from crossview import memory
from crossview.attention.match import NonFiniteError as NonFiniteError
from crossview.data.calibration import StereoCalibration as StereoCalibration
from crossview.data.calibration import read_stereo_calibration as read_stereo_calibration
from crossview.data.calibration import write_stereo_calibration
from crossview.data.image_batch import ImageLike, sample_image
from crossview.data.image_batch import as_image_batch as as_image_batch
from crossview.data.io import IMAGE_SUFFIXES as IMAGE_SUFFIXES
from crossview.data.io import read_image as read_image
from crossview.data.io import write_flo as write_flo
from crossview.data.io import write_image as write_image
from crossview.data.io import write_kitti_disparity as write_kitti_disparity
from crossview.data.io import write_kitti_flow as write_kitti_flow
from crossview.data.io import write_npy as write_npy
from crossview.data.io import write_pfm as write_pfm
from crossview.data.io import write_png16 as write_png16
from crossview.data.ply import write_ply as write_ply
from crossview.data.rig_calibration import RigCalibration, read_rig_calibration
from crossview.data.video import count_frames as count_video_frames  # noqa: F401 (re-exported)
from crossview.data.video import frames
from crossview.data.video import is_video as is_video
from crossview.data.video import open_video as open_video
from crossview.data.video import require_video_writer as require_video_writer
from crossview.defaults import DEFAULT_FLOW_MODEL, DEFAULT_MATCH_MODEL, DEFAULT_STEREO_MODEL
from crossview.device import resolve_device
from crossview.distributed import dist_info_from_env
from crossview.errors import UserError
from crossview.geometry.confidence import field_confidence
from crossview.geometry.depth import depth_edge_mask, depth_to_points, disparity_to_depth
from crossview.geometry.disparity import field_to_disparity
from crossview.geometry.rectification import RectifiedPair, rectify_pair
from crossview.geometry.uncalibrated_rectification import (
    UncalibratedRectification,
    rectify_uncalibrated,
)
from crossview.lazy import lazy_import
from crossview.models import published, registry
from crossview.models.dense.inference import (
    CONSISTENCY_THRESHOLD,
    LIBRARY_ADVICE,
    Fields,
    MemoryAdvice,
    fuses_with_classical,
    predict_fields,
)
from crossview.models.dense.inference import check_memory as check_memory
from crossview.models.keypoints.contract import is_keypoint_matcher
from crossview.models.keypoints.inference import match_pair
from crossview.models.registry import Predictor
from crossview.output import check_output_files, staged_files
from crossview.train.logplot import plot_log as plot_log
from crossview.train.pair_adaptation import AdaptationSettings as AdaptationSettings
from crossview.train.pair_adaptation import adapt_to_pair as adapt_to_pair

if TYPE_CHECKING:
    from crossview.eval import EvalResult as EvalResult
    from crossview.train.config import Config

# training reads YAML (PyYAML, the optional [train] extra): its modules load when a run starts
_config = lazy_import("crossview.train.config")
_recipes = lazy_import("crossview.train.recipes")
_trainer = lazy_import("crossview.train.trainer")
_checkpoint = lazy_import("crossview.train.checkpoint")
_runlog = lazy_import("crossview.train.runlog")
# evaluation: the loop, the metrics (SciPy), the benchmark readers (SciPy) and the classical
# baselines (OpenCV) load when first used (a single pair needs none of them)
evaluation = lazy_import("crossview.eval")
metrics = lazy_import("crossview.metrics")
datasets = lazy_import("crossview.data.datasets")
baselines = lazy_import("crossview.baselines")
# the flow video of a run (the colour wheel draws with matplotlib): loaded when one is written
flow_video = lazy_import("crossview.data.flow_video")
disparity_video = lazy_import("crossview.data.disparity_video")  # a stereo run's, likewise

ESTIMATORS = {"stereo": "estimate_disparity", "flow": "estimate_flow"}
video_frames = frames  # the frames [H, W, 3] uint8 of a video file, decoded one by one
_log = logging.getLogger(__name__)


class RandomWeightsWarning(UserWarning):
    """A model runs with random weights: its output is meaningless."""


def check_run_settings(device: str, setting: str = "device") -> None:
    """Refuse (:class:`UserError`, one line naming ``setting``) a device this machine lacks and
    a bad ``$CROSSVIEW_MAX_MEMORY_GB``, once, before a run of many pairs starts."""
    resolve_device(device, setting)
    memory.memory_limit()


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
    """:class:`ModelInfo` of the registered model ``name`` (its parameters counted without
    loading weights: :meth:`~crossview.models.registry.ModelSpec.parameter_count`)."""
    spec = registry.get_spec(name)
    licence = None
    if spec.weights_path is not None:
        weights, licence = "bundled", _package_licence()
    elif spec.published is not None:
        weights = "published, " + ("in the cache" if published.cached_path(
            spec.published).is_file() else "not downloaded")
    else:
        weights = "none"
    return ModelInfo(spec.name, spec.task, spec.parameter_count(), weights, licence)


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
            ``matchstereo-hybrid``, ``transformatcher``, ``multiview``, ...), or the
            ``.safetensors`` file of a model ``crossview train --export`` wrote (its
            ``NAME.json`` beside it; :func:`crossview.models.registry.get_spec`).
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
    return _load(registry.get_spec(name), weights, device=device, download=download,
                 **overrides)


def _load(spec: registry.ModelSpec, weights: str | os.PathLike | None, *,
          device: str | torch.device, download: bool, **overrides: Any) -> nn.Module:
    """:func:`load_model` of the looked-up ``spec``."""
    path = spec.weights_file(weights, download=download)
    if path is None:
        warnings.warn(f"{spec.name} has no weights (pass weights=...): it runs with random "
                      "weights and its output is meaningless", RandomWeightsWarning, stacklevel=3)
    return _registered(spec.create(path, **overrides), spec, path).to(resolve_device(device))


def load_task_model(name: str, task: str, weights: str | os.PathLike | None = None, *,
                    purpose: str, device: str | torch.device = "cpu", download: bool = False,
                    quiet: bool = False) -> nn.Module:
    """:func:`load_model` for a job that needs a ``task`` model (``purpose`` names the job in
    the error: ``"crossview stereo"``): a model of another task is a :class:`UserError`, checked
    before any weights are read; running on random weights is a log warning (logger
    ``crossview.api``, shown by the command line as ``warning: ...``) instead of a
    :class:`RandomWeightsWarning`, none with ``quiet``."""
    spec = registry.get_spec(name)
    check_task(name, spec.task, task, purpose)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", RandomWeightsWarning)
        model = _load(spec, weights, device=device, download=download)
    for warning in caught if not quiet else ():
        _log.warning("%s", warning.message)
    return model


def check_task(name: str, estimates: str, task: str, purpose: str) -> None:
    """:class:`UserError` ``model NAME estimates flow; PURPOSE needs a stereo model`` when the
    model ``name`` estimates another task than ``task`` (a stereo model cannot estimate flow,
    nor the other way round: same architecture, weights trained for one task)."""
    if estimates != task:
        raise UserError(f"model {name!r} estimates {estimates}; {purpose} needs a {task} model")


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
    model.fuse_by_default = spec.fuse
    model.fused_network = spec.fused_network
    return model.eval()


def predictor(model: nn.Module, *, device: str = "cpu", precision: str = "fp32",
              refine: bool | None = None, lri: bool | None = None,
              adapt: int = 0, variant: str | None = None,
              fuse: bool | None = None, preset: str | None = None,
              self_fuse: bool = False) -> Predictor:
    """The ``sample -> prediction`` callable that :func:`crossview.eval.evaluate` runs for a
    model from :func:`load_model` (its family's, see
    :attr:`crossview.models.registry.ModelSpec.predictor`). ``refine`` / ``lri`` / ``fuse``:
    dense models' photometric refinement, low-resolution initialisation and (stereo) SGBM
    fusion on or off (``None``: the model's defaults), ``preset`` the fused run's speed preset
    (:mod:`crossview.models.dense.presets`), ``self_fuse`` (stereo) the network's views fused
    with each other instead (:func:`estimate_disparity`); a :class:`UserError` for a model
    without them. ``adapt``: each
    sample runs a copy of the model adapted to its pair with that many steps
    (:func:`adapt_to_pair`; dense models only; 0: off). ``variant``: one of
    :func:`predictor_variants` instead of the whole model."""
    spec = registry.get_spec(model.model_name)
    if spec.predictor is None:
        raise UserError(f"model {spec.name!r} has no benchmark predictor: no benchmark scores "
                        f"{spec.task} models")
    if variant is not None:
        if variant not in spec.variants:
            raise UserError(f"model {spec.name!r} has no predictor variant {variant!r}; "
                            f"variants: {', '.join(spec.variants) or 'none'}")
        return spec.predictor(model, device, precision, variant)
    if self_fuse and fuse:
        raise UserError("--self-fuse fuses the network's two views with each other instead of "
                        "with SGBM: drop --fuse")
    options = {key: value for key, value in (("refine", refine), ("lri", lri), ("fuse", fuse),
                                             ("preset", preset),
                                             ("self_fuse", self_fuse or None))
               if value is not None}
    if options and spec.task not in ESTIMATORS:
        raise UserError(f"model {spec.name!r} ({spec.task}) has no "
                        f"{' or '.join(options)} option: dense (stereo, flow) models only")
    if not adapt:
        return spec.predictor(model, device, precision, **options)
    if spec.task not in ESTIMATORS:
        raise UserError(f"test-time adaptation needs a stereo or flow model; {spec.name!r} "
                        f"estimates {spec.task}")
    settings = adaptation_settings(model, spec.task, adapt, fuse, self_fuse)

    def predict(sample: dict[str, Any]) -> Any:
        adapted = adapt_to_pair(model, sample_image(sample["image0"]),
                                sample_image(sample["image1"]), spec.task, settings=settings,
                                lri=lri, device=device)
        return spec.predictor(adapted, device, precision, **options)(sample)

    return predict


def benchmark_predictor(name: str, task: str, weights: str | os.PathLike | None = None, *,
                        device: str = "cpu", precision: str = "fp32", quiet: bool = False,
                        download: bool = False, sample_size: tuple[int, int] | None = None,
                        refine: bool | None = None, lri: bool | None = None,
                        adapt: int = 0, fuse: bool | None = None, preset: str | None = None,
                        self_fuse: bool = False
                        ) -> tuple[Predictor, dict[str, Predictor], AdaptationSettings | None]:
    """The predictor of the registered model ``name`` on a ``task`` benchmark,
    ``{caption: predictor}`` of its variants (:func:`predictor_variants`) on the same loaded
    network, and the budget of its test-time adaptation (:func:`adaptation_settings`;
    ``None`` without ``adapt``): loaded by :func:`load_task_model` (``quiet``: no
    random-weights warning, as on all ranks but the first), then :func:`predictor`. With
    ``sample_size`` (``(H, W)`` every sample has), a model that would need more memory than
    this machine has is refused now (:func:`check_memory`), before any sample is read or
    generated."""
    models = ", ".join(list_models(task)) or "none"
    model = load_task_model(name, task, weights, purpose=f"a {task} benchmark (its models: "
                            f"{models})", device=device, download=download, quiet=quiet)
    predict = predictor(model, device=device, precision=precision, refine=refine, lri=lri,
                        adapt=adapt, fuse=fuse, preset=preset, self_fuse=self_fuse)
    if sample_size is not None:
        check_memory(model, *sample_size, task=task, device=device, lri=lri, refine=refine,
                     advice=MemoryAdvice("evaluate at a smaller size (the dataset's size=HxW "
                                         "option)", "--no-refine"))
    variants = {caption: predictor(model, device=device, precision=precision, variant=variant)
                for variant, caption in predictor_variants(name).items()}
    adaptation = adaptation_settings(model, task, adapt, fuse, self_fuse) if adapt else None
    return predict, variants, adaptation


# progress(label, total) starts a task of ``total`` samples and returns its step(sample name)
ProgressTracker = Callable[[str, int], Callable[[str], None]]


@dataclass
class BenchmarkRun:
    """What :func:`evaluate_benchmark` gives: the model's ``result``, the ``baselines`` scored
    beside it (``None`` on kinds without any), the dataset ``kind`` (its name, task, note and
    reduction), this process's place in the run (``dist``: ``dist.is_main`` reports) and the
    budget each sample's test-time adaptation had (``adaptation``; ``None``: none)."""

    result: EvalResult
    baselines: list[Any] | None  # crossview.baselines.BaselineRun
    kind: Any  # crossview.data.datasets.registry.DatasetKind
    dist: Any  # crossview.distributed.DistInfo
    adaptation: AdaptationSettings | None = None


def evaluate_benchmark(model: str, dataset: str, *, weights: str | os.PathLike | None = None,
                       metric_names: list[str] | None = None, limit: int | None = None,
                       device: str = "cpu", precision: str = "fp32", download: bool = False,
                       refine: bool | None = None, lri: bool | None = None, adapt: int = 0,
                       fuse: bool | None = None, preset: str | None = None,
                       self_fuse: bool = False, distributed: bool | None = None,
                       progress: ProgressTracker | None = None,
                       report: Callable[[BenchmarkRun], None] | None = None) -> BenchmarkRun:
    """Score ``model`` (a registered name or an exported file) on the benchmark ``dataset``
    (``KIND[,OPTION=VALUE...]:PATH``, see :func:`crossview.data.datasets.open_dataset`) with
    its own metrics (or ``metric_names``), on its first ``limit`` samples; with the model's
    variants and the classical baselines beside it on kinds that have them (real ``scenes``).

    ``distributed``: join the process group of a ``torchrun`` launch (``None``: when launched
    so; ``False``: score alone even then): every rank checks the input and loads the model
    before the group opens (bad input fails on every rank, no rank waits), scores its strided
    share, and every rank gets the merged result. ``progress(label, total)`` starts a task and
    returns its ``step(name)``, called per sample (on every rank: the caller shows rank 0's).
    ``report(run)`` runs on the main rank while the others wait (a rank ending early cannot
    get the job stopped before the report is written). Raises :class:`UserError` for a bad
    model, dataset, metric, limit or device.
    """
    if limit is not None and limit < 1:
        raise UserError(f"--limit must be at least 1, got {limit}")
    resolve_device(device, "--device")
    info = dist_info_from_env() if distributed is not False else process_group.DistInfo()
    if distributed and not info.enabled:
        raise UserError("distributed evaluation needs a torchrun launch (WORLD_SIZE, RANK)")
    # the dataset's errors come first: a mistyped model name is reported by benchmark_predictor
    known = model.lower() in list_models() or Path(model).is_file()  # or an export's file
    data, kind = datasets.open_dataset(dataset, task=model_task(model) if known else None)
    specs = metrics.get_metrics(kind.task, metric_names or kind.metrics)
    if info.enabled and device.startswith("cuda"):
        device = f"cuda:{info.local_rank}"
    size = getattr(getattr(data, "config", None), "size", None)  # a generated set's (H, W)
    predict, variants, adaptation = benchmark_predictor(
        model, kind.task, weights, device=device, precision=precision, quiet=not info.is_main,
        download=download, sample_size=None if size is None else (int(size[0]), int(size[1])),
        refine=refine, lri=lri, adapt=adapt, fuse=fuse, preset=preset, self_fuse=self_fuse)
    total = len(data) if limit is None else min(limit, len(data))
    info = process_group.init_distributed(device) if info.enabled else info
    try:
        share = len(process_group.shard_strided(total, info))

        def on_sample(label: str) -> Any:
            step = progress(label, share) if progress is not None else None
            return None if step is None else lambda _, name, __: step(name)

        rank = f" (rank 0 of {info.world_size})" if info.enabled else ""
        result = evaluation.evaluate(data, predict, specs, reduction=kind.reduction,
                                     dataset_name=kind.name, limit=limit,
                                     on_sample=on_sample(f"eval {kind.name}{rank}"),
                                     dist_info=info)
        runs = None
        if kind.baseline:
            methods = [baselines.Baseline(caption.split(":")[0], caption, variant, opencv=False)
                       for caption, variant in variants.items()]
            runs = [baselines.evaluate_baseline(data, specs, baseline=method,
                                                reduction=kind.reduction, limit=limit,
                                                on_sample=on_sample(f"{method.name} baseline"),
                                                dist_info=info)
                    for method in [*methods, *baselines.BASELINES[kind.task]]]
        run = BenchmarkRun(result, runs, kind, info, adaptation)
        try:
            if report is not None and info.is_main:
                report(run)
        finally:
            process_group.barrier(info)
    finally:
        process_group.close_distributed(info)
    return run


def predictor_variants(name: str) -> dict[str, str]:
    """``{variant: caption}`` of the registered model ``name``: the predictors of the same
    network without a part of it that benchmarks score beside it (raw correlation for
    TransforMatcher), see :func:`predictor`."""
    return dict(registry.get_spec(name).variants)


@dataclass
class StereoResult:
    """Disparities (positive px) ``[B, H, W]`` of the left and right views, their left-right
    consistency (non-occlusion) masks ``[B, H, W]`` bool, and the self relative positions at
    full resolution ``[B, H, W, 2]`` (px; where each pixel draws its information from), and a
    per-pixel confidence ``[B, H, W]`` in [0, 1] of each view
    (:mod:`crossview.geometry.confidence`: left-right consistency and attention peak); for a
    run fused with SGBM, each left view's share ``[B]`` in [0, 1] of pixels that the network
    answers (``network_share``; ``None`` unfused): where it is ~0 the answer is SGBM's and the
    fill's, and the network's weights only set SGBM's search range and the tone match; and
    the offset ``[B]`` px the right image's rows were lined up by before matching
    (``row_offset``; 0: rectified as given; ``None``: a run that does not line rows up), which
    ``row_offset=`` of :func:`estimate_disparity` takes for later pairs of the same rig."""

    disparity: torch.Tensor
    disparity_right: torch.Tensor
    valid: torch.Tensor
    valid_right: torch.Tensor
    self_rpos: torch.Tensor
    self_rpos_right: torch.Tensor
    confidence: torch.Tensor
    confidence_right: torch.Tensor
    network_share: torch.Tensor | None = None
    row_offset: torch.Tensor | None = None


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
                       threshold: float = CONSISTENCY_THRESHOLD, refine: bool | None = None,
                       min_confidence: float = 0.0,
                       advice: MemoryAdvice = LIBRARY_ADVICE, adapt: int = 0,
                       fuse: bool | None = None,
                       init: torch.Tensor | None = None,
                       preset: str | None = None,
                       row_offset: torch.Tensor | float | None = None,
                       self_fuse: bool = False) -> StereoResult:
    """Disparity of both views of a rectified stereo pair.

    Args:
        left, right: the pair (see the module docstring), same size.
        model: a name (loaded with ``weights``, and kept for the next call with the same
            name, weights and device: :data:`KEPT_MODELS`) or a model from :func:`load_model`;
            the model is moved to ``device``.
        precision: ``"fp32"``, ``"bf16"`` or ``"fp16"`` (autocast; fields stay float32).
        lri: low-resolution initialisation: a half-resolution pass gives the initial field;
            ``None``: the model's default (``model.lri_by_default``: on for the bundled
            ``matchstereo-hybrid``, where it was chosen on held-out real scenes; off where it
            fuses, see ``fuse``).
        size: fixed-resolution inference ``(H, W)``: run at that size, resize back.
        threshold: left-right consistency threshold in px for ``valid``.
        refine: polish both fields photometrically
            (:mod:`crossview.geometry.photometric_refinement`); ``None``: the model's default
            (``model.refine_by_default``: on for crossview's hybrid models, off for the
            published ones; off where ``matchstereo-hybrid`` fuses, see ``fuse``).
        min_confidence: pixels whose confidence is below this (in [0, 1]) are not ``valid``
            either (0: the consistency mask alone).
        advice: what a pair refused for its memory tells to change (before anything runs:
            :func:`check_memory`; the command line names its options).
        adapt: test-time adaptation: fit a copy of the model to this pair with ``adapt``
            steps of the self-supervised loss first (:func:`adapt_to_pair`, the learning rate
            of :func:`adaptation_settings`; several times the cost of inference); 0: off.
        fuse: fuse both views' disparities with OpenCV SGBM's
            (:mod:`crossview.models.dense.sgbm_fusion`: left-right checked SGBM where it
            answers, the network's consistent pixels in its long holes, the rest filled along
            the row, then edge medians and the out-of-view strip); ``None``: the model's
            default (``model.fuse_by_default``: on for the bundled ``matchstereo-hybrid``,
            where it was chosen on held-out real scenes; fused, that model runs its network at
            0.75 of the pair without lri and refinement unless ``lri``, ``refine`` or ``size``
            say otherwise). The attention-peak part of ``confidence`` stays the network's.
        init: a warm start, e.g. the previous frame's answer: both views' fields
            ``[2B, H, W, 2]`` (px; :func:`disparity_fields` of a :class:`StereoResult`) that
            start the network in place of its own initialisation
            (:func:`~crossview.models.dense.inference.predict_fields`); see
            :func:`crossview.stereo_stream`.
        preset: ``"fast"``, ``"balanced"`` or ``"best"``: a point of the fused default's
            measured speed/accuracy curve (:mod:`crossview.models.dense.presets`); ``None``:
            the model's own settings (for ``matchstereo-hybrid`` those of
            ``presets.DEFAULT_PRESETS``). Fusing models only.
        row_offset: the right image's rows' offset (px; a number, or ``[B]``), as
            ``StereoResult.row_offset`` of an earlier pair from the same rig gives it: the
            rows are lined up by it instead of measuring it again (a fused run of a model that
            lines rows up; :class:`StereoSequence` does this for a stream); ``None``: measured.
        self_fuse: without SGBM: the network run on the pair and on its mirror image (left to
            right, the images swapped), each at the pair's size and enlarged 1.25 and 1.5
            times, each pixel from the run whose matches look most alike around it (the least census
            matching cost over 15x15 px), then the two views fused with each other: the
            left-right consistent pixels kept, the rest filled along the row, the fusion's
            edge medians and out-of-view strip (:mod:`crossview.models.dense.self_fusion`;
            every value is the network's; better than the network alone and than SGBM filled
            on real scenes, at about nine times the network's cost; after ``adapt`` the
            adapted network's six runs). Replaces the SGBM fusion (``fuse`` must not be
            ``True``).

    Returns:
        :class:`StereoResult` (float32 tensors on ``device``).
    """
    check_min_confidence(min_confidence)
    fields = _predict(model, weights, left, right, "stereo", device=device, precision=precision,
                      lri=lri, size=size, threshold=threshold, refine=refine, advice=advice,
                      adapt=adapt, fuse=fuse, init=init, preset=preset, row_offset=row_offset,
                      self_fuse=self_fuse)
    field, rpos, share = fields.field, fields.self_rpos, fields.network_share
    b = field.shape[0] // 2
    confidence = _confidence(fields)
    valid = fields.valid & (confidence >= min_confidence)
    return StereoResult(field_to_disparity(field[:b]), field_to_disparity(field[b:], "right"),
                        valid[:b], valid[b:], rpos[:b], rpos[b:], confidence[:b], confidence[b:],
                        None if share is None else share[:b], fields.row_offset)


def _confidence(fields: Fields) -> torch.Tensor:
    """:func:`field_confidence` ``[2B, H, W]`` of ``fields``, from their consistency error."""
    return field_confidence(fields.field, fields.attention_peak, error=fields.consistency_error)


def estimate_flow(img0: ImageLike, img1: ImageLike, *, model: str | nn.Module = DEFAULT_FLOW_MODEL,
                  weights: str | os.PathLike | None = None, device: str = "cpu",
                  precision: str = "fp32", lri: bool | None = None,
                  size: tuple[int, int] | None = None,
                  threshold: float = CONSISTENCY_THRESHOLD, refine: bool | None = None,
                  min_confidence: float = 0.0,
                  advice: MemoryAdvice = LIBRARY_ADVICE, adapt: int = 0,
                  fuse: bool | None = None, preset: str | None = None) -> FlowResult:
    """Optical flow between two frames, both directions; arguments as :func:`estimate_disparity`
    (``fuse``: with OpenCV DIS's flow, :mod:`crossview.models.dense.dis_fusion`; ``None``: the
    model's default, on for the bundled ``matchflow-hybrid``; ``preset`` as there, for
    ``matchflow-hybrid``).

    Returns:
        :class:`FlowResult` (float32 tensors on ``device``).
    """
    check_min_confidence(min_confidence)
    fields = _predict(model, weights, img0, img1, "flow", device=device, precision=precision,
                      lri=lri, size=size, threshold=threshold, refine=refine, advice=advice,
                      adapt=adapt, fuse=fuse, preset=preset)
    field, rpos = fields.field, fields.self_rpos
    b = field.shape[0] // 2
    flow, confidence = field.permute(0, 3, 1, 2), _confidence(fields)
    valid = fields.valid & (confidence >= min_confidence)
    return FlowResult(flow[:b], flow[b:], valid[:b], valid[b:], rpos[:b], rpos[b:],
                      confidence[:b], confidence[b:])


def disparity_fields(result: StereoResult) -> torch.Tensor:
    """Both views' fields ``[2B, H, W, 2]`` (px) of ``result``, as the network gives them
    (left views ``-disparity``, right views ``+disparity``, y 0; a non-finite disparity
    becomes 0): what ``init`` of :func:`estimate_disparity` takes."""
    x = torch.nan_to_num(torch.cat([-result.disparity, result.disparity_right]), nan=0.0,
                         posinf=0.0, neginf=0.0)
    return torch.stack([x, torch.zeros_like(x)], dim=-1)


# A stream from one rig measures its rows' offset on its first pair and again every this many
# pairs (and whenever the pairs' size changes): a rig's offset stays, and measuring it took 0.05
# of the 0.34 s of a 640x480 frame with the balanced preset (docs/results/stereo-video)
ROWS_MEASURED_EVERY = 30


@dataclass
class StereoSequence:
    """Consecutive rectified pairs from one rig (a video, a camera): :meth:`estimate` runs
    :func:`estimate_disparity` on each pair with what the pairs before it found.

    - ``warm_start``: the previous pair's answer starts the network (``init=``,
      :func:`disparity_fields`; a pair of another size starts from it resized).
    - The right image's rows' offset (``row_offset=``, :attr:`StereoResult.row_offset`) is
      measured on the first pair, then every ``rows_every`` pairs and on a change of size,
      and reused in between (1: measured on every pair).
    """

    warm_start: bool = True
    rows_every: int = ROWS_MEASURED_EVERY
    _init: torch.Tensor | None = None
    _offset: torch.Tensor | None = None  # [B] px at _size, as the last measurement gave it
    _size: tuple[int, ...] | None = None  # (B, H, W) of the pairs the offset was measured on
    _since: int = 0  # pairs run with the offset since it was measured

    def __post_init__(self) -> None:
        if isinstance(self.rows_every, bool) or not isinstance(self.rows_every, int) \
                or self.rows_every < 1:
            raise UserError(f"rows_every must be a number of pairs, 1 or more, got "
                            f"{self.rows_every!r}")

    def estimate(self, left: ImageLike, right: ImageLike, **options: Any) -> StereoResult:
        """:func:`estimate_disparity` of the next pair (``options``: its other arguments but
        ``init`` and ``row_offset``, which the sequence sets)."""
        for name in ("init", "row_offset"):
            if name in options:
                raise TypeError(f"a StereoSequence sets {name} itself; do not pass it")
        left = as_image_batch(left, "left image")
        size = (left.shape[0], *left.shape[-2:])
        measure = self._offset is None or size != self._size or self._since >= self.rows_every
        result = estimate_disparity(left, right, init=self._init,
                                    row_offset=None if measure else self._offset, **options)
        if measure:
            self._offset, self._size, self._since = result.row_offset, size, 0
        self._since += 1
        if self.warm_start:
            self._init = disparity_fields(result)
        return result


# the models estimate_disparity / estimate_flow loaded by name, newest last, kept for the next
# call with the same name, weights file and device: a loop over pairs reads the weights once
# (the bundled stereo model takes about 0.3 s to build and load, as long as a balanced pair)
KEPT_MODELS = 2
_kept_models: OrderedDict[tuple, nn.Module] = OrderedDict()
_kept_models_lock = threading.Lock()


def _named_model(name: str, weights: str | os.PathLike | None,
                 target: torch.device) -> nn.Module:
    """:func:`load_model` of ``name`` and ``weights`` on ``target``, or the model a call before
    loaded from the same file (its size and modification time unchanged) onto the same device
    (:data:`KEPT_MODELS`). Models without a weights file are built every time (and warned
    about every time)."""
    spec = registry.get_spec(name)
    path = spec.weights_file(weights)
    try:
        stat = None if path is None else os.stat(path)
    except OSError:  # load_model names what is wrong with the file
        stat = None
    if stat is None:
        return load_model(name, weights, device=target)
    key = (name, os.fspath(path), stat.st_mtime_ns, stat.st_size, str(target))
    with _kept_models_lock:
        model = _kept_models.pop(key, None)
        if model is None:
            model = _load(spec, path, device=target, download=False)
        _kept_models[key] = model
        while len(_kept_models) > KEPT_MODELS:
            _kept_models.popitem(last=False)
    return model


def check_min_confidence(min_confidence: float, name: str = "min_confidence") -> None:
    """A :class:`UserError` naming ``name`` unless ``min_confidence`` lies in [0, 1]
    (confidences do)."""
    if not 0 <= min_confidence <= 1:
        raise UserError(f"{name} must be in [0, 1] (a confidence), got {min_confidence:g}")


def adaptation_settings(model: nn.Module, task: str, steps: int, fuse: bool | None,
                        self_fuse: bool = False) -> AdaptationSettings:
    """The budget of ``steps`` adaptation steps for a run of ``model`` with ``fuse`` and
    ``self_fuse`` (:meth:`AdaptationSettings.for_run`: a stereo run whose answer is the
    network's adapts at a larger rate than one fused with SGBM)."""
    return AdaptationSettings.for_run(steps, task,
                                      fuses_with_classical(model, task, fuse, self_fuse))


def _predict(model: str | nn.Module, weights: str | os.PathLike | None, img0: ImageLike,
             img1: ImageLike, task: str, *, device: str, precision: str, lri: bool | None,
             size: tuple[int, int] | None, threshold: float, refine: bool | None,
             advice: MemoryAdvice, adapt: int, fuse: bool | None = None,
             init: torch.Tensor | None = None, preset: str | None = None,
             row_offset: torch.Tensor | float | None = None, self_fuse: bool = False) -> Fields:
    """Full-resolution fields, self relative positions, mask and attention peak
    (:class:`~crossview.models.dense.inference.Fields`), after ``adapt`` steps of test-time
    adaptation (0: none)."""
    target = resolve_device(device)
    if isinstance(model, str):
        model = _named_model(model, weights, target)
    if getattr(model, "task", None) is not None:
        check_task(getattr(model, "model_name", type(model).__name__), model.task, task,
                   ESTIMATORS[task])
    if isinstance(adapt, bool) or not isinstance(adapt, int) or adapt < 0:
        raise UserError(f"adapt must be a number of steps, 0 or more, got {adapt!r}")
    if adapt:
        model = adapt_to_pair(model, img0, img1, task,
                              settings=adaptation_settings(model, task, adapt, fuse, self_fuse),
                              lri=lri, device=target)
    return predict_fields(model, img0, img1, task, device=target, precision=precision, lri=lri,
                          size=size, threshold=threshold, refine=refine, advice=advice,
                          fuse=fuse, init=init, preset=preset,
                          row_offset=row_offset, self_fuse=self_fuse)


# ----------------------------------------------------------------------------- training


@dataclass
class TrainingRun:
    """What :func:`train` did: ``cfg`` (the configuration as run), ``summary`` (the trainer's:
    ``step``, ``steps_run``, ``train`` and ``val`` logs, ``signal``, ``is_main``; ``None`` when
    only exporting), ``finished`` (``train.steps`` reached), ``step`` (the model's) and
    ``exported``, the files written for ``export``."""

    cfg: Config
    summary: dict[str, Any] | None
    finished: bool
    step: int
    exported: list[Path]


def train(config: str | os.PathLike[str], *, resume: bool = False,
          init_weights: str | os.PathLike[str] | None = None, grow: bool = False,
          out_dir: str | os.PathLike[str] | None = None, steps: int | None = None,
          export: Path | None = None, description: str = "",
          export_only: bool = False) -> TrainingRun:
    """Train as the YAML configuration ``config`` says (:mod:`crossview.train`), ``out_dir``
    and ``steps`` replacing ``train.out_dir`` and ``train.steps``; ``resume``, ``init_weights``
    and ``grow`` as :class:`crossview.train.trainer.Trainer` takes them. Everything the run
    writes is checked before it starts (on the rank that writes). With ``export`` (a
    ``.safetensors`` path), a finished run writes the model's weights there (and what its
    recipe writes beside them); ``export_only`` exports the newest checkpoint's model without
    training. A mistake in the configuration is one :class:`UserError` line."""
    cfg = _config.load_config(config)
    if out_dir is not None:
        cfg.train.out_dir = str(out_dir)
    if steps is not None:
        cfg.train.steps = steps
    recipe = _recipes.get_recipe(cfg.task)
    recipe.check(cfg)
    if dist_info_from_env().is_main:  # the rank that writes; checked before any training
        if export is not None:
            recipe.check_export(export)
        run_dir = Path(cfg.train.out_dir)
        check_output_files([run_dir / _runlog.LOG_NAME, run_dir / _checkpoint.BEST_NAME])
    trainer = _trainer.Trainer(cfg, resume=resume, init_weights=init_weights, grow=grow)

    def write_export() -> list[Path]:
        return recipe.export(trainer.model, export, name=export.stem, description=description,
                             cfg=cfg, step=trainer.step)

    if export_only:
        try:
            return TrainingRun(cfg, None, True, trainer.step, write_export())
        finally:
            trainer.close()
    summary = trainer.run()
    finished = summary["step"] >= cfg.train.steps
    exported = write_export() if summary["is_main"] and export is not None and finished else []
    return TrainingRun(cfg, summary, finished, summary["step"], exported)


# ----------------------------------------------------------------------------- published weights


def list_published() -> list[str]:
    """Names of the models whose authors publish weights (``weights="published"``), sorted."""
    return registry.list_published()


def _published_spec(name: str) -> registry.ModelSpec:
    """The spec of ``name``, which has published weights; a :class:`UserError` listing the
    names that have some otherwise."""
    if not isinstance(name, str) or name.lower() not in registry.list_published():
        raise UserError(f"no published weights named {name!r}; choose one of: "
                        f"{', '.join(registry.list_published())}")
    return registry.get_spec(name)


def weights_cache() -> Path:
    """The cache folder of published weights (``$CROSSVIEW_HOME`` or the user cache)."""
    return published.home()


def published_path(name: str) -> Path:
    """Where the cache keeps the published weights of model ``name`` (there or not)."""
    return published.cached_path(_published_spec(name).published)


def published_recorded(name: str) -> bool:
    """Whether the SHA-256 of ``name``'s cached published weights is recorded (it is once the
    file has loaded as the model's checkpoint); :class:`UserError` for a damaged record."""
    return published.recorded_digest(published_path(name), name) is not None


def download_published(name: str) -> Path:
    """Fetch ``name``'s published weights into the cache unless they are there and intact;
    their path."""
    return Path(_published_spec(name).weights_file(published.NAME, download=True))


def verify_published(name: str) -> Path:
    """Check ``name``'s cached published weights against their recorded SHA-256 and load them
    as the model's checkpoint (:func:`crossview.models.published.verify`; a damaged file is
    removed and a :class:`UserError` says so); their path."""
    spec = _published_spec(name)
    return published.verify(spec.name, spec.published, spec.create, load=True)


# ----------------------------------------------------------------------------- depth and points


@dataclass
class MetricDepth:
    """A disparity map in metres: ``depth [H, W]`` float64 (NaN where dropped: no depth),
    ``keep [H, W]`` bool (the pixels kept) and ``points [N, 3]`` float64, the kept pixels' 3D
    points (x right, y down, z forward; metres, row-major order of ``keep``)."""

    depth: torch.Tensor
    keep: torch.Tensor
    points: torch.Tensor


def metric_depth(disparity: torch.Tensor, valid: torch.Tensor, calibration: StereoCalibration,
                 *, max_depth: float | None, edge_ratio: float) -> MetricDepth:
    """Depth and points of a left-view ``disparity [H, W]`` (px) with the calibration of its
    pair, keeping pixels that are ``valid [H, W]``, at a positive depth, not beyond
    ``max_depth`` metres (``None``: any) and, with ``edge_ratio`` > 0, not at a depth edge
    (:func:`crossview.geometry.depth.depth_edge_mask`: flying pixels); the others' depth is NaN
    (0 would read as a depth, and a map's consumers skip NaN)."""
    cal = calibration
    depth = disparity_to_depth(disparity.double(), cal.focal, cal.baseline, cal.doffs)
    keep = valid & (depth > 0)
    if max_depth is not None:
        keep &= depth <= max_depth
    if edge_ratio > 0:
        keep &= ~depth_edge_mask(depth, edge_ratio)
    depth = torch.where(keep, depth, torch.nan)
    cx, cy = cal.principal_point(*depth.shape)
    return MetricDepth(depth, keep, depth_to_points(depth, cal.focal, cx, cy)[keep])


# ------------------------------------------------------------------------------- rectification


def rectify_stereo(left: str | os.PathLike | np.ndarray, right: str | os.PathLike | np.ndarray,
                   calibration: str | os.PathLike | RigCalibration, *,
                   alpha: float = 0.0) -> RectifiedPair:
    """Rectify an unrectified stereo pair with OpenCV (``opencv-python-headless``, a dependency)
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
    images = [image if isinstance(image, np.ndarray) else read_image(image)
              for image in (left, right)]
    return rectify_pair(*images, rig, alpha=alpha)


def rectify_photographs(left: str | os.PathLike | np.ndarray,
                        right: str | os.PathLike | np.ndarray) -> UncalibratedRectification:
    """Rectify two photographs of one scene taken side by side, without a calibration, from
    their own feature matches (quasi-Euclidean: each camera turned, a focal length fitted;
    :mod:`crossview.geometry.uncalibrated_rectification`), so that :func:`estimate_disparity`
    works on them.

    Args:
        left, right: image paths or ``[H, W, 3]`` uint8 arrays of one size, the left camera's
            first.

    Returns:
        :class:`~crossview.geometry.uncalibrated_rectification.UncalibratedRectification`: both
        rectified images, the homographies ``[3, 3]`` that made them, the fitted focal length,
        the matches' count and remaining row difference, and the shift of the disparities.

    The left photograph must come first (the matches do not tell the order). Raises
    :class:`UserError` for images of different sizes or too few matches between them.
    """
    images = [image if isinstance(image, np.ndarray) else read_image(image)
              for image in (left, right)]
    return rectify_uncalibrated(*images)


RECTIFIED_FILES = ("left.png", "right.png", "calib.txt")
UNCALIBRATED_FILES = ("left.png", "right.png", "rectification.json")


def write_rectified(pair: RectifiedPair, folder: str | os.PathLike) -> list[str]:
    """Write ``pair`` into ``folder`` as ``left.png``, ``right.png`` and ``calib.txt`` (a
    Middlebury calibration file, which ``crossview stereo --calib`` reads), all or nothing
    (:func:`crossview.output.staged_files`). Returns the three paths."""
    paths = [os.path.join(folder, name) for name in RECTIFIED_FILES]
    with staged_files(paths) as (left, right, calib):
        write_image(left, pair.left)
        write_image(right, pair.right)
        write_stereo_calibration(calib, pair.calibration)
    return paths


def uncalibrated_writers(pair: UncalibratedRectification) -> list[Callable[[Path], None]]:
    """Writers of ``pair``'s files, in the order of :data:`UNCALIBRATED_FILES`: the rectified
    left and right images and ``rectification.json`` (the homographies, focal length, matches,
    row difference, disparity shift and range); each takes the path to write."""
    record = {"left_homography": pair.left_homography.tolist(),
              "right_homography": pair.right_homography.tolist(), "focal_px": pair.focal,
              "matches": pair.matches, "row_error_px": pair.row_error,
              "disparity_shift_px": pair.disparity_shift,
              "disparity_range_px": list(pair.disparity_range)}
    return [lambda path: write_image(path, pair.left), lambda path: write_image(path, pair.right),
            lambda path: Path(path).write_text(json.dumps(record, indent=1) + "\n")]


def write_uncalibrated(pair: UncalibratedRectification, folder: str | os.PathLike) -> list[str]:
    """Write ``pair`` into ``folder`` as :data:`UNCALIBRATED_FILES`
    (:func:`uncalibrated_writers`), all or nothing. Returns the three paths."""
    paths = [os.path.join(folder, name) for name in UNCALIBRATED_FILES]
    with staged_files(paths) as staged:
        for path, write in zip(staged, uncalibrated_writers(pair), strict=True):
            write(path)
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

    ``model``: a keypoint matcher
    (:class:`~crossview.models.keypoints.contract.KeypointMatcher`, such as
    :class:`~crossview.models.transformatcher.TransforMatcher`); default:
    ``load_model(DEFAULT_MATCH_MODEL, weights)`` (``transformatcher``, the bundled weights
    unless ``weights``).
    Without ``points``, an 8 x 8 grid over the source. Both images are resized to the model's
    square input (240 x 240 for TransforMatcher) as in the paper; the results are mapped back to
    the original pixel frames.
    """
    target = resolve_device(device)
    if model is None:
        model = load_model(DEFAULT_MATCH_MODEL, weights)
    if not is_keypoint_matcher(model):
        raise UserError(f"{type(model).__name__} does not match keypoints (it keeps no "
                        "KeypointMatcher contract, see crossview.models.keypoints)")
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
