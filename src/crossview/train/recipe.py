"""What the training loop asks of a model family: the recipe interface.

:class:`~crossview.train.trainer.Trainer` owns everything families share (AdamW and its
schedule, clipping, autocast, non-finite guard, checkpoints, resume, kill -9 safety, torchrun,
the log and the progress bar); a :class:`Recipe` owns what differs:

================  ============================================================================
build             ``build_model(cfg)``, ``build_datasets(cfg)``, ``load_init_weights``
batch             ``collate(samples) -> batch`` (a dict of tensors; the trainer moves it to the
                  device); ``unlabelled_set(cfg)``: an optional stream of unlabelled samples
                  that joins every batch (self-supervision)
loss              ``forward(model, batch, cfg) -> outputs`` (what DistributedDataParallel wraps)
                  and ``loss(outputs, batch, cfg) -> (loss, {name: float})``
validation        ``validation_sample(sample)``, ``predictor(model, cfg)`` and ``metrics(cfg)``
                  for :func:`crossview.eval.evaluate`; ``best`` names the metric that chooses
                  ``best.pt`` and whether lower or higher is better; ``preview(sample,
                  prediction)``: a picture of a prediction for TensorBoard (default: none)
export            ``export_paths(path)`` (checked before training) and ``export(...)``
================  ============================================================================

Each recipe validates its options (the config's ``recipe`` section) with the dataclass
``options_type`` (:meth:`Recipe.options`), like the configuration's own fields. The recipes of
the package are in :mod:`crossview.train.recipes`, one file per family, each registering its
own (:func:`register_recipe`); :data:`RECIPES` finds them all on the first lookup.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch
from torch import nn

from crossview import settings
from crossview.errors import UserError
from crossview.metrics.score import MetricSpec
from crossview.registry import Registry, import_modules
from crossview.train.checkpoint import check_export_path
from crossview.train.config import Config

Batch = dict[str, torch.Tensor]


@dataclass
class NoOptions:
    """A recipe without options: any key in the ``recipe`` section is an error."""


def _checked(cls: type, values: dict[str, Any], prefix: str) -> Any:
    """:func:`crossview.settings.build`, a mistake as one :class:`UserError` line."""
    try:
        return settings.build(cls, values, prefix)
    except settings.SettingError as error:
        raise UserError(f"config: {error}") from None


class Recipe:
    """The family-specific half of a training run (see the module docstring for the parts).

    Subclasses set ``task``, ``datasets`` (the ``data.train``/``data.val`` names they read),
    ``best`` (``(metric name, "min" | "max")``), ``options_type``, and for a family outside
    the model registry ``model_name`` and ``overrides_type`` (the one ``model.name`` it trains
    and the dataclass its ``model.overrides`` must fit), and implement the methods that raise
    :class:`NotImplementedError` here.
    """

    task: str = ""
    datasets: tuple[str, ...] = ()
    best: tuple[str, str] = ("epe", "min")
    options_type: type = NoOptions
    model_name: str = ""
    overrides_type: type | None = None

    # ------------------------------------------------------------------ build
    def options(self, cfg: Config) -> Any:
        """The config's ``recipe`` section as :attr:`options_type` (:class:`UserError`
        ``config: recipe.KEY ...`` for a mistake)."""
        return _checked(self.options_type, cfg.recipe, "recipe")

    def overrides(self, cfg: Config) -> Any:
        """``model.overrides`` as :attr:`overrides_type`, checked like the configuration's
        own fields, once ``model.name`` is :attr:`model_name`."""
        if cfg.model.name != self.model_name:
            raise UserError(f"config: model.name is {cfg.model.name!r}, but a {self.task} run "
                            f"trains {self.model_name!r}")
        return _checked(self.overrides_type, cfg.model.overrides, "model.overrides")

    def check(self, cfg: Config) -> None:
        """:class:`UserError` unless ``cfg`` is one this recipe can run (datasets, options,
        model overrides)."""
        for key in ("train", "val"):
            name = getattr(cfg.data, key)
            if name not in self.datasets:
                raise UserError(f"config: data.{key} is {name!r}, but a {self.task} run reads "
                                f"{' or '.join(map(repr, self.datasets))}")
        self.options(cfg)
        if self.overrides_type is not None:
            self.overrides(cfg)

    def build_model(self, cfg: Config) -> nn.Module:
        """The randomly initialised network ``cfg.model`` names."""
        raise NotImplementedError

    def check_model(self, model: nn.Module, cfg: Config) -> None:
        """:class:`UserError` if ``model`` cannot train on ``cfg``'s data (default: no check)."""

    def build_datasets(self, cfg: Config) -> tuple[Any, Any]:
        """Map-style training and validation sets (validation None when ``data.val_size`` is
        0) of the samples :meth:`collate` stacks."""
        raise NotImplementedError

    def load_init_weights(self, model: nn.Module, path: str | Path, *, grow: bool) -> None:
        """Fine-tuning: load the weights file ``path`` into ``model``."""
        raise UserError(f"--init-weights is not supported for {self.task} runs")

    def unlabelled_set(self, cfg: Config) -> tuple[Any, int] | None:
        """An extra stream of unlabelled samples whose ``size`` of each step's samples join
        the batch under ``unlabelled_<key>`` keys, as ``(dataset, size)``, or None (default)."""
        return None

    def param_groups(self, model: nn.Module, cfg: Config) -> list[dict[str, Any]]:
        """AdamW parameter groups, each with its peak ``lr`` (default: every trainable
        parameter at ``optim.lr``)."""
        return [{"params": [p for p in model.parameters() if p.requires_grad],
                 "lr": cfg.optim.lr}]

    # ------------------------------------------------------------------- step
    def collate(self, samples: Sequence[Mapping[str, torch.Tensor]]) -> Batch:
        """Stack training samples into a batch."""
        raise NotImplementedError

    def forward(self, model: nn.Module, batch: Batch, cfg: Config) -> dict[str, Any]:
        """The training forward of ``model`` on ``batch``."""
        raise NotImplementedError

    def loss(self, outputs: dict[str, Any], batch: Batch, cfg: Config
             ) -> tuple[torch.Tensor, dict[str, float]]:
        """The scalar loss to minimise and the values to log (``loss`` among them)."""
        raise NotImplementedError

    # ------------------------------------------------------------- validation
    def validation_sample(self, sample: Mapping[str, Any]) -> Mapping[str, Any]:
        """A validation-set sample in the layout :meth:`metrics` read (default: as it is)."""
        return sample

    def predictor(self, model: nn.Module, cfg: Config, device: torch.device
                  ) -> Callable[[Mapping[str, Any]], Any]:
        """A :func:`crossview.eval.evaluate` predictor (numpy sample -> prediction) running
        ``model`` (in eval mode, gradients off, under the trainer's autocast)."""
        raise NotImplementedError

    def metrics(self, cfg: Config) -> list[MetricSpec]:
        """The validation metrics (pooled over the validation set); their names are the keys
        of the ``val`` log records."""
        raise NotImplementedError

    def preview(self, sample: Mapping[str, Any], prediction: Any) -> np.ndarray | None:
        """A picture of the :meth:`predictor`'s ``prediction`` for the validation sample
        ``sample`` (the numpy sample :func:`crossview.eval.evaluate` gives the predictor),
        ``[H, W, 3]`` uint8 RGB, shown in TensorBoard at each validation
        (:mod:`crossview.train.tensorboard_log`); None (the default): no picture."""
        return None

    # ----------------------------------------------------------------- export
    def export_paths(self, path: Path) -> list[Path]:
        """Every file :meth:`export` writes for ``--export path`` (checked before training)."""
        return [path]

    def check_export(self, path: Path) -> None:
        """:class:`UserError` naming what is in the way of ``--export path``: not a
        ``.safetensors`` name, or a directory / unwritable place where a file goes."""
        check_export_path(path, self.export_paths(path)[1:])

    def export(self, model: nn.Module, path: Path, *, name: str, description: str,
               cfg: Config, step: int) -> list[Path]:
        """Write ``model``'s weights (and what describes them) to ``path``; returns the
        files written."""
        raise UserError(f"--export is not supported for {self.task} runs")


def image_tensor(array: np.ndarray, device: torch.device) -> torch.Tensor:
    """A numpy image of an evaluation sample ``[H, W, 3]`` (0..255) -> ``[1, 3, H, W]`` float32
    on ``device``, the layout the models take."""
    return torch.from_numpy(np.ascontiguousarray(array, np.float32)).permute(2, 0, 1)[None].to(
        device)


# task -> recipe; every module of crossview.train.recipes registers the recipes it defines
RECIPES: Registry[str, Recipe] = Registry("training recipe",
                                          import_modules("crossview.train.recipes"))


def register_recipe(recipe: Recipe) -> Recipe:
    """Add ``recipe`` as the one that trains ``recipe.task``."""
    return RECIPES.register(recipe.task, recipe)


def get_recipe(task: str) -> Recipe:
    """The recipe that trains ``task`` (:class:`UserError` naming the known ones)."""
    if task not in RECIPES:
        raise UserError(f"config: task must be one of {', '.join(map(repr, RECIPES.keys()))}, got "
                        f"{task!r} (no training recipe trains it)")
    return RECIPES.get(task)


class ValidationView(Sequence):
    """A validation set seen through :meth:`Recipe.validation_sample` (what
    :func:`crossview.eval.evaluate` reads)."""

    def __init__(self, dataset: Any, recipe: Recipe) -> None:
        self.dataset = dataset
        self.recipe = recipe

    def __len__(self) -> int:
        return len(self.dataset)

    def __getitem__(self, index: int) -> Mapping[str, Any]:  # type: ignore[override]
        return self.recipe.validation_sample(self.dataset[index])
