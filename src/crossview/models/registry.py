"""Named models of every family: what to build, for which task, with which default weights, and
how to run it on a benchmark sample.

A family is one folder of this package whose ``specs.py`` registers its models with
:func:`register_model` (see docs/conventions.md, "Adding a model family"); the folders are
found when a name is first looked up, so adding a family touches no other file. Registered
today: ``matchstereo-t/-s/-b``, ``matchflow-b`` (published architectures, weights not shipped),
the bundled ``matchstereo-mini/-hybrid`` and ``matchflow-mini/-hybrid``
(:mod:`crossview.models.matchstereo.specs`), ``transformatcher``
(:mod:`crossview.models.transformatcher.specs`) and ``multiview``
(:mod:`crossview.models.multiview.specs`).

A spec's ``weights`` is a file name inside ``crossview/models/weights/`` or an absolute path;
it is what :func:`crossview.load_model` loads when the caller gives no weights. A spec's
``published`` names the checkpoint its authors publish (file name and URL,
:mod:`crossview.models.published`): the weights named ``"published"``, and the default of a
model that ships none.
"""

from __future__ import annotations

import dataclasses
import functools
import os
import warnings
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
from torch import nn
from torch.overrides import TorchFunctionMode

from crossview import settings
from crossview.errors import UserError
from crossview.models import published as published_weights
from crossview.models.published import PublishedWeights
from crossview.models.weights import load_weights, safetensors_numel
from crossview.registry import Registry, import_modules

WEIGHTS_DIR = Path(__file__).resolve().parent / "weights"

# ``sample -> prediction`` as crossview.eval runs it (disparity [H, W], flow [H, W, 2],
# keypoints [N, 2]), built by ``predictor(model, device, precision)``
Predictor = Callable[[Mapping[str, Any]], Any]
PredictorBuilder = Callable[..., Predictor]


@dataclass(frozen=True)
class FusedNetwork:
    """How a model that fuses with a classical matcher runs when it fuses. Stereo (SGBM): its
    network on the pair resized by ``scale`` (unless that is below the model's least size),
    with or without the low-resolution initialisation and the photometric refinement; fused,
    the network sets SGBM's search range and fills SGBM's long holes only, which a smaller pass
    does as well (chosen on real scenes: docs/results/real-stereo/README.md). Stereo and flow:
    pairs of more than ``max_pixels`` pixels run whole (network and fusion) at a working size
    of at most that many, their fields enlarged back (the fusions' lengths and thresholds were
    chosen on images of at most half a megapixel, and the flow network on motions of that
    scale). Stereo: a pair whose rows are offset by ``align_px`` or more is lined up first
    (SGBM searches along rows only). ``classical_runs`` and ``median_passes`` set the fusion's
    work: how many of its classical runs run (the first ones of
    :data:`crossview.models.dense.sgbm_fusion.FUSION_SGBM_RUNS`, of
    :data:`crossview.models.dense.dis_fusion.FLOW_DIS_RUNS` for flow) and which of its
    colour-weighted median passes (indices into
    :data:`crossview.models.dense.sgbm_fusion.EDGE_MEDIANS`); ``None``: all of them. The speed
    presets (:mod:`crossview.models.dense.presets`) are settings of these fields."""

    scale: float = 1.0
    lri: bool = False
    refine: bool = False
    # a pair of more pixels runs whole (network and fusion) on the pair resized to about this
    # many, its fields resized back (None: every pair at its own size)
    max_pixels: int | None = None
    # stereo: a pair whose rows are offset by at least this many px
    # (crossview.models.dense.vertical_alignment) runs with its right image moved to line up,
    # the right view's fields moved back (None: never)
    align_px: float | None = None
    classical_runs: int | None = None
    median_passes: tuple[int, ...] | None = None

    def __post_init__(self) -> None:
        if self.median_passes is not None:  # a JSON list, as the weights' description holds it
            object.__setattr__(self, "median_passes", tuple(self.median_passes))
        if self.classical_runs is not None and self.classical_runs < 1:
            raise ValueError(f"classical_runs must be >= 1 or None, got {self.classical_runs}")
        if self.median_passes is not None and (
                len(set(self.median_passes)) != len(self.median_passes)
                or any(not isinstance(i, int) or i < 0 for i in self.median_passes)):
            raise ValueError("median_passes must be distinct indices >= 0 or None, got "
                             f"{self.median_passes}")
        if not 0 < self.scale <= 1:
            raise ValueError(f"scale must be in (0, 1], got {self.scale}")
        if self.max_pixels is not None and self.max_pixels < 1:
            raise ValueError(f"max_pixels must be positive or None, got {self.max_pixels}")
        if self.align_px is not None and not self.align_px >= 0:
            raise ValueError(f"align_px must be >= 0 or None, got {self.align_px}")


@dataclass(frozen=True)
class ModelSpec:
    """A registered model.

    Attributes:
        name: what :func:`crossview.load_model` takes (looked up in lower case).
        build: ``build(**overrides)`` returns a fresh, randomly initialised network; overrides
            are the family's configuration fields (``dims=(8, 16, 16, 24)``, ...).
        task: ``"stereo"``, ``"flow"``, ``"semantic"``, ``"novel-view"``: what the model
            estimates (the benchmarks of that task can score it).
        weights: the default weights file, or ``None`` when the package ships none.
        description: one line for listings.
        predictor: ``predictor(model, device, precision)`` -> a ``sample -> prediction``
            callable for :func:`crossview.eval.evaluate`; ``None`` for models no benchmark
            runs. With ``variants``, ``predictor(model, device, precision, variant)`` gives
            the predictor of one of them.
        variants: ``{variant: caption}``: predictors of the same network without a part of it
            (the refinement), which ``crossview eval`` scores beside the model on benchmarks
            that show baselines; the caption's text before its first colon labels the row.
        load: ``load(path, **overrides)`` builds the network from a weights file, for families
            whose architecture depends on the file; default: ``build(**overrides)`` and load
            ``path`` strictly (:func:`crossview.models.weights.load_weights`).
        published: the checkpoint its authors publish (file name and URL), or ``None``.
        refine: dense models only: whether inference polishes the network's field with
            :mod:`crossview.geometry.photometric_refinement` unless told otherwise (on for
            crossview's own models where it was measured to help; off for published ones, so
            that they reproduce their authors' numbers).
        lri: dense models only: whether inference starts from a half-resolution pass
            (low-resolution initialisation) unless told otherwise (on where it was chosen on
            held-out real scenes; off for published ones).
        fuse: whether inference fuses the network's fields with the classical matcher's,
            OpenCV SGBM (stereo, :mod:`crossview.models.dense.sgbm_fusion`) or DIS (flow,
            :mod:`crossview.models.dense.dis_fusion`), unless told otherwise (on where it was
            chosen on real scenes; off for published ones).
        fused_network: how the network runs when it fuses (:class:`FusedNetwork`) unless told
            otherwise; ``None``: as when it does not (``lri``, ``refine``, full size).
    """

    name: str
    build: Callable[..., nn.Module]
    task: str
    weights: str | None = None
    description: str = ""
    predictor: PredictorBuilder | None = None
    variants: Mapping[str, str] = dataclasses.field(default_factory=dict)
    load: Callable[..., nn.Module] | None = None
    published: PublishedWeights | None = None
    refine: bool = False
    lri: bool = False
    fuse: bool = False
    fused_network: FusedNetwork | None = None

    @property
    def weights_path(self) -> Path | None:
        """The default weights file, or ``None`` when the package ships none for this model."""
        if self.weights is None:
            return None
        path = Path(self.weights)
        return path if path.is_absolute() else WEIGHTS_DIR / path

    def weights_file(self, weights: str | os.PathLike[str] | None, *, download: bool = False,
                     progress: bool = True) -> str | os.PathLike[str] | None:
        """The file that ``weights`` names for this model: ``None`` means the bundled weights,
        else the published ones, else none (``None``: random weights); ``"published"`` means
        the published checkpoint (in the cache, its SHA-256 checked, or loaded once before it
        is recorded: :func:`crossview.models.published.verify`; downloaded first if missing and
        ``download``, see :func:`crossview.models.published.download`); any other value is a
        path, returned as given."""
        if weights is None:
            if self.weights_path is not None or self.published is None:
                return self.weights_path
        elif weights != published_weights.NAME:  # a path (a Path never equals the name)
            return weights
        if self.published is None:
            raise UserError(f"{self.name} has no published weights; models with published "
                            f"weights: {', '.join(list_published())}")
        if download:
            return published_weights.download(self.name, self.published, self.create,
                                              progress=progress)
        return published_weights.verify(self.name, self.published, self.create)

    def create(self, weights: str | os.PathLike[str] | None, **overrides: Any) -> nn.Module:
        """The network with ``weights`` loaded (randomly initialised when ``None``)."""
        if weights is None:
            return self.build(**overrides)
        if self.load is not None:
            return self.load(weights, **overrides)
        return load_weights(self.build(**overrides), weights,
                            hint=functools.partial(_fitting_hint, task=self.task))

    def parameter_count(self) -> int:
        """The network's parameter count. Bundled ``.safetensors`` weights that load strictly
        (no :attr:`load`) hold exactly the network's state dict, which in crossview's networks
        is their parameters (frozen parts are non-persistent buffers; a test holds this for
        every bundled model): their count is read from the file's header, because building a
        network with frozen features takes about a second even on the meta device. Other
        models are counted on :meth:`skeleton`."""
        path = self.weights_path
        if self.load is None and path is not None and path.suffix == ".safetensors":
            return safetensors_numel(path)
        return sum(p.numel() for p in self.skeleton().parameters())

    def skeleton(self) -> nn.Module:
        """The network built on the meta device: the keys and shapes of its state dict and its
        parameter count, with no memory and no weights read into it (and no random
        initialisation: :class:`_NoRandomFills`)."""
        with warnings.catch_warnings(), torch.device("meta"), _NoRandomFills():
            # a family that loads frozen features at build time is told that copying them into
            # meta tensors does nothing, which is the point here
            warnings.simplefilter("ignore")
            return self.build()


class _NoRandomFills(TorchFunctionMode):
    """Skips weight initialisation (the in-place ``torch.nn.init`` functions and
    ``Tensor.normal_`` / ``uniform_``): a meta tensor holds no values, and torch runs
    ``normal_`` on one through Python code whose first call imports ``torch._dynamo`` (about a
    second)."""

    def __torch_function__(self, func: Callable[..., Any], types: Any, args: tuple = (),
                           kwargs: dict[str, Any] | None = None) -> Any:
        if func in (torch.Tensor.normal_, torch.Tensor.uniform_) or (
                getattr(func, "__module__", None) == "torch.nn.init"
                and func.__name__.endswith("_")):
            return args[0] if args else kwargs["tensor"]  # torch.nn.init names it so
        return func(*args, **(kwargs or {}))


def configured(config: Any, make: Callable[[Any], nn.Module]) -> Callable[..., nn.Module]:
    """A :attr:`ModelSpec.build` for a family configured by a dataclass: ``make(config)``, with
    the overrides replacing its fields, each checked like the field itself
    (:class:`crossview.settings.SettingError`, a ``ValueError``: ``overrides.heads must be
    >= 1, got 0``)."""

    def build(**overrides: Any) -> nn.Module:
        if not overrides:
            return make(config)
        values = {**{f.name: getattr(config, f.name) for f in dataclasses.fields(config)},
                  **overrides}
        return make(settings.build(type(config), values, "overrides"))

    return build


# every family folder's specs.py registers its models
MODELS: Registry[str, ModelSpec] = Registry("model", import_modules(__package__, "specs"))

# ``reader(path)``: the spec of the model that the file ``path`` describes (a family's
# ``crossview train --export`` output), named ``str(path)``; None if it is not one of the
# family's. Each family's specs.py adds its reader.
ModelFileReader = Callable[[Path], ModelSpec | None]
MODEL_FILES: list[ModelFileReader] = []


def register_model(spec: ModelSpec, *, replace: bool = False) -> ModelSpec:
    """Add ``spec`` under ``spec.name`` (lower case); ``replace=True`` to overwrite a name."""
    return MODELS.register(spec.name.lower(), spec, replace=replace)


def register_model_files(reader: ModelFileReader) -> ModelFileReader:
    """Add ``reader`` to the readers of model files that :func:`get_spec` asks."""
    MODEL_FILES.append(reader)
    return reader


def get_spec(name: str) -> ModelSpec:
    """The spec registered under ``name``, else that of the model file ``name`` (what
    ``crossview train --export`` wrote, read by its family's reader: :data:`MODEL_FILES`);
    :class:`UserError` listing the names otherwise (``TypeError`` if ``name`` is not a
    string)."""
    if not isinstance(name, str):
        raise TypeError(f"the model name must be a string, got {name!r}; choose one of: "
                        f"{', '.join(list_models())}")
    if name.lower() in MODELS:  # the name as given, not lower-cased
        return MODELS.get(name.lower())
    if Path(name).is_file():
        for reader in MODEL_FILES:
            spec = reader(Path(name))
            if spec is not None:
                return spec
        raise UserError(f"{name}: not a model file (a NAME.safetensors that `crossview train "
                        "--export` wrote, its NAME.json beside it); a weights file of a "
                        "registered model goes with --weights")
    raise UserError(f"unknown model {name!r}; choose one of: {', '.join(list_models())}, or "
                    "the .safetensors file that `crossview train --export` wrote")


def weights_named(value: str | os.PathLike[str], what: str) -> str | os.PathLike[str]:
    """The weights file that ``value``, given as ``what`` (``--init-weights``), names: an
    existing file as given, else the default weights of the registered model of that name
    (:meth:`ModelSpec.weights_file`: bundled, or published and in the cache). A
    :class:`UserError` for a model without weights or a value that is neither."""
    if Path(value).is_file():
        return value
    name = str(value).lower()
    if name not in MODELS:
        raise UserError(f"{what} {value}: no such file, and no model of that name (`crossview "
                        "models` lists the names)")
    path = MODELS.get(name).weights_file(None)
    if path is None:
        raise UserError(f"{what} {value}: model {name!r} has no weights (neither bundled nor "
                        "published)")
    return path


def models_fitting(state_dict: Mapping[str, torch.Tensor], task: str) -> list[str]:
    """Names of the registered ``task`` models whose state dict has exactly the keys and shapes
    of ``state_dict`` (compared on :meth:`ModelSpec.skeleton`, so no weights are built), sorted.
    Families whose architecture depends on the weights file (a ``load``) are not compared."""
    def shapes(tensors: Mapping[str, torch.Tensor]) -> dict[str, tuple[int, ...]]:
        return {key: tuple(value.shape) for key, value in tensors.items()}

    wanted = shapes(state_dict)
    return [name for name in list_models(task) if MODELS.get(name).load is None
            and shapes(MODELS.get(name).skeleton().state_dict()) == wanted]


def _fitting_hint(state_dict: Mapping[str, torch.Tensor], task: str) -> str:
    """What a weights mismatch adds: the registered models the weights fit, if any (weights
    given without the matching ``--model`` are the usual cause)."""
    names = models_fitting(state_dict, task)
    if not names:
        return f"; they fit no registered {task} model"
    if len(names) == 1:
        return f"; they fit the registered model {names[0]}: choose it (--model {names[0]})"
    return f"; they fit the registered models {', '.join(names)}: choose one (--model NAME)"


def list_published() -> list[str]:
    """Names of the registered models whose specs name published weights, sorted."""
    return [name for name, spec in MODELS.items() if spec.published is not None]


def list_models(task: str | None = None) -> list[str]:
    """Registered model names (of ``task`` only, if given), sorted."""
    return [name for name, spec in MODELS.items() if task in (None, spec.task)]
