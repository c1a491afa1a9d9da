"""The multi-view depth recipe: depth of every view from posed, unrectified views.

A :class:`~crossview.models.multiview.depth.MultiViewDepth` (``model.name: multiview-depth``;
its ``conditioning`` and sizes in ``model.overrides``, as for ``multiview`` plus ``none``)
predicts the depth of every view of a synthetic scene from its images and cameras
(:mod:`crossview.data.synthetic.depth_scenes`: random baselines, per-view zoom, views
``recipe.separation`` degrees apart). Training sample ``i`` of the stream (``data.train_size``
long) is scene ``i % recipe.scenes`` with its ``views`` views in a random order (seeded by
``data.seed`` and ``i``); the loss is the mean ``|log d - log d*|`` over every valid pixel of
every view. Validation scores view 0 of ``data.val_size`` held-out scenes with ``abs_rel`` and
``delta1`` (:mod:`crossview.metrics.depth`) through :func:`crossview.eval.evaluate`;
``best.pt`` is the lowest ``abs_rel``. The depth study
(:mod:`crossview.experiments.camera_depth`) runs this recipe once per conditioning and seed.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch
from torch import nn
from torch.utils.data import Dataset

from crossview import settings
from crossview.data.synthetic.depth_scenes import make_depth_scenes
from crossview.metrics.depth import ABS_REL, DELTA1
from crossview.metrics.score import MetricSpec
from crossview.models.multiview.contract import view_predictor
from crossview.models.multiview.depth import DEPTH_CONDITIONINGS, MultiViewDepth
from crossview.train.config import Config
from crossview.train.recipe import Batch, register_recipe
from crossview.train.recipes.novel_view import (
    SIZES,
    TEST_SEED_OFFSET,
    MultiViewOverrides,
    NovelViewRecipe,
)

MODEL_NAME = "multiview-depth"
KEYS = (*MultiViewDepth.inputs, "depth", "valid")


@dataclass
class DepthOverrides(MultiViewOverrides):
    """What ``model.overrides`` may set for ``model.name: multiview-depth`` (the
    ``multiview`` fields; ``conditioning`` may also be ``none``)."""

    conditioning: str = settings.setting(SIZES.conditioning, choices=DEPTH_CONDITIONINGS)


@dataclass
class DepthOptions:
    """The ``recipe`` section of a multi-view depth run: ``scenes`` rendered for training,
    each with ``views`` views; per-view zoom from ``zoom`` (log-uniform); angle between view
    0 and each other view from ``separation`` (degrees); ``scenes_seed`` seeds the
    rendering."""

    scenes: int = settings.setting(10000, low=1)
    views: int = settings.setting(2, low=2)
    zoom: tuple[float, float] = settings.setting((1.0, 1.5), low=0, low_open=True)
    separation: tuple[float, float] = settings.setting((5.0, 20.0), low=0)
    scenes_seed: int = settings.setting(1234, low=0)

    def __post_init__(self) -> None:
        settings.check(self)
        for name in ("zoom", "separation"):
            low, high = getattr(self, name)
            if low > high:
                raise settings.SettingError(f"{name} must be [low, high] with low <= high, "
                                            f"got {[low, high]}")


def _pick(scenes: dict[str, torch.Tensor], index: int, views: torch.Tensor
          ) -> dict[str, torch.Tensor]:
    return {key: scenes[key][index][views] for key in KEYS}


class ShuffledViews(Dataset):
    """Training stream over rendered ``scenes`` (one :func:`make_depth_scenes` setting):
    sample ``i`` is scene ``i % N`` with its views in a random order seeded by ``(seed, i)``;
    keys :data:`KEYS` (``images [V, 3, H, W]`` 0..255, ``K [V, 3, 3]``, ``viewmats
    [V, 4, 4]``, ``depth [V, H, W]``, ``valid [V, H, W]``)."""

    def __init__(self, scenes: dict[str, torch.Tensor], length: int, seed: int) -> None:
        self.scenes, self.length, self.seed = scenes, length, seed

    def __len__(self) -> int:
        return self.length

    def __getitem__(self, index: int) -> dict[str, torch.Tensor]:
        views = self.scenes["images"].shape[1]
        gen = torch.Generator().manual_seed(self.seed * 1_000_003 + index)
        return _pick(self.scenes, index % len(self.scenes["images"]),
                     torch.randperm(views, generator=gen))


class FirstViews(Dataset):
    """Evaluation scenes: the first ``views`` views of each scene, in order (view 0 is the
    one scored); keys :data:`KEYS`."""

    def __init__(self, scenes: dict[str, torch.Tensor], views: int) -> None:
        self.scenes, self.views = scenes, torch.arange(views)

    def __len__(self) -> int:
        return len(self.scenes["images"])

    def __getitem__(self, index: int) -> dict[str, torch.Tensor]:
        return _pick(self.scenes, index, self.views)


class MultiViewDepthRecipe(NovelViewRecipe):
    """Multi-view depth (see the module docstring); model sizes and export as ``novel-view``."""

    task = "multiview-depth"
    datasets = ("depth-scenes",)
    best = ("abs_rel", "min")
    options_type = DepthOptions
    model_name = MODEL_NAME
    overrides_type = DepthOverrides

    def build_model(self, cfg: Config) -> nn.Module:
        return MultiViewDepth(self.model_config(cfg))

    def build_datasets(self, cfg: Config) -> tuple[Any, Any]:
        o, size = self.options(cfg), (cfg.data.height, cfg.data.width)
        train = make_depth_scenes(o.scenes, o.views, o.zoom, o.separation, o.scenes_seed, size,
                                  split="train")["main"]
        val = None
        if cfg.data.val_size > 0:
            test = make_depth_scenes(cfg.data.val_size, o.views, o.zoom, o.separation,
                                     o.scenes_seed + TEST_SEED_OFFSET, size, split="heldout")
            val = FirstViews(test["main"], o.views)
        return ShuffledViews(train, cfg.data.train_size, cfg.data.seed), val

    def collate(self, samples: Sequence[Mapping[str, torch.Tensor]]) -> Batch:
        return {key: torch.stack([s[key] for s in samples]) for key in KEYS}

    def forward(self, model: nn.Module, batch: Batch, cfg: Config) -> dict[str, Any]:
        return {"depth": model(*(batch[key] for key in model.inputs))}

    def loss(self, outputs: dict[str, Any], batch: Batch, cfg: Config
             ) -> tuple[torch.Tensor, dict[str, float]]:
        valid = batch["valid"]
        error = (outputs["depth"].log() - batch["depth"].clamp_min(1e-6).log()).abs()
        loss = error[valid].mean()
        return loss, {"loss": loss.item()}

    def predictor(self, model: nn.Module, cfg: Config, device: torch.device
                  ) -> Callable[[Mapping[str, Any]], np.ndarray]:
        views = view_predictor(model, device)
        return lambda sample: views(sample)[0]  # view 0 is the one scored

    def metrics(self, cfg: Config) -> list[MetricSpec]:
        return [ABS_REL, DELTA1]


register_recipe(MultiViewDepthRecipe())
