"""The novel-view recipe: the camera-encoding study's multi-view transformer on posed scenes.

A :class:`~crossview.models.multiview.MultiViewTransformer` (``model.name: multiview``; its
``conditioning`` and sizes in ``model.overrides``, images ``data.height x data.width``) renders
target views of a synthetic scene from context views and every view's camera
(:mod:`crossview.data.synthetic.camera_scenes`: each view has its own zoom). Training sample
``i`` of the stream (``data.train_size`` long) is scene ``i % recipe.scenes`` with ``context +
targets`` of its ``views`` views chosen at random (seeded by ``data.seed`` and ``i``); the loss
is the mean squared error of the rendered targets (0..1 range). Validation renders the last
``targets`` views of ``data.val_size`` held-out scenes from their first ``context`` views, scored
with PSNR and SSIM (:mod:`crossview.metrics.image`) through :func:`crossview.eval.evaluate`;
``best.pt`` is the highest PSNR. The study (:mod:`crossview.experiments.camera_encodings`) runs
this recipe once per conditioning and seed.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch
from torch import nn
from torch.utils.data import Dataset

from crossview import settings
from crossview.data.synthetic.camera_scenes import make_scenes
from crossview.errors import UserError
from crossview.metrics.image import PSNR, SSIM, TASK
from crossview.metrics.score import MetricSpec
from crossview.models.multiview import CONDITIONINGS, MultiViewConfig, MultiViewTransformer
from crossview.models.multiview.contract import view_predictor
from crossview.models.weights import write_safetensors
from crossview.train.config import Config
from crossview.train.recipe import Batch, Recipe, register_recipe

MODEL_NAME = "multiview"
TEST_SEED_OFFSET = 1  # held-out scenes: scenes_seed + 1
KEYS = (*MultiViewTransformer.inputs, "target_images")


SIZES = MultiViewConfig()  # the defaults: declared once, by the model's configuration


@dataclass
class MultiViewOverrides:
    """What ``model.overrides`` may set for ``model.name: multiview`` (default: the
    :class:`MultiViewConfig` defaults)."""

    conditioning: str = settings.setting(SIZES.conditioning, choices=CONDITIONINGS)
    patch: int = settings.setting(SIZES.patch, low=1)
    width: int = settings.setting(SIZES.width, low=1)
    depth: int = settings.setting(SIZES.depth, low=1)
    heads: int = settings.setting(SIZES.heads, low=1)
    mlp_ratio: int = settings.setting(SIZES.mlp_ratio, low=1)

    def __post_init__(self) -> None:
        settings.check(self)


@dataclass
class NovelViewOptions:
    """The ``recipe`` section of a novel-view run: ``scenes`` rendered for training, each with
    ``views`` views; ``context`` views in, ``targets`` views out; per-view zoom drawn from
    ``zoom`` (log-uniform); ``scenes_seed`` seeds the rendering."""

    scenes: int = settings.setting(1000, low=1)
    views: int = settings.setting(6, low=2)
    context: int = settings.setting(2, low=1)
    targets: int = settings.setting(2, low=1)
    zoom: tuple[float, float] = settings.setting((1.0, 3.0), low=0, low_open=True)
    scenes_seed: int = settings.setting(1234, low=0)

    def __post_init__(self) -> None:
        settings.check(self)
        if self.zoom[0] > self.zoom[1]:
            raise settings.SettingError(f"zoom must be [low, high] with low <= high, got "
                                        f"{list(self.zoom)}")
        if self.context + self.targets > self.views:
            raise settings.SettingError(f"context + targets ({self.context} + {self.targets}) "
                                        f"must be at most views ({self.views})")


class RandomViews(Dataset):
    """Training stream over rendered ``scenes`` (:func:`make_scenes` dicts): sample ``i`` is
    scene ``i % N`` with ``context + targets`` of its views in a random order seeded by
    ``(seed, i)``; keys :data:`KEYS` (images ``[V, 3, H, W]`` 0..255, ``K [V, 3, 3]``,
    ``viewmats [V, 4, 4]``)."""

    def __init__(self, scenes: dict[str, torch.Tensor], length: int, context: int,
                 targets: int, seed: int) -> None:
        self.scenes, self.length = scenes, length
        self.context, self.targets, self.seed = context, targets, seed

    def __len__(self) -> int:
        return self.length

    def __getitem__(self, index: int) -> dict[str, torch.Tensor]:
        views = self.scenes["images"].shape[1]
        gen = torch.Generator().manual_seed(self.seed * 1_000_003 + index)
        order = torch.randperm(views, generator=gen)[:self.context + self.targets]
        return _pick(self.scenes, index % len(self.scenes["images"]), order[:self.context],
                     order[self.context:], "images", "K")


class FixedViews(Dataset):
    """Evaluation scenes: views ``context`` in, views ``targets`` out (index tensors), images
    and intrinsics read from ``images_key`` / ``K_key`` (the study's zoomed renders use
    ``images_zoomed`` / ``K_zoomed``); keys :data:`KEYS`."""

    def __init__(self, scenes: dict[str, torch.Tensor], context: torch.Tensor,
                 targets: torch.Tensor, images_key: str = "images", K_key: str = "K") -> None:
        self.scenes, self.context, self.targets = scenes, context, targets
        self.images_key, self.K_key = images_key, K_key

    def __len__(self) -> int:
        return len(self.scenes[self.images_key])

    def __getitem__(self, index: int) -> dict[str, torch.Tensor]:
        return _pick(self.scenes, index, self.context, self.targets, self.images_key, self.K_key)


def _pick(scenes: dict[str, torch.Tensor], index: int, context: torch.Tensor,
          targets: torch.Tensor, images_key: str, K_key: str) -> dict[str, torch.Tensor]:
    images, K, viewmats = scenes[images_key][index], scenes[K_key][index], scenes["viewmats"][index]
    return {"context_images": images[context], "context_K": K[context],
            "context_viewmats": viewmats[context], "target_K": K[targets],
            "target_viewmats": viewmats[targets], "target_images": images[targets]}


class NovelViewRecipe(Recipe):
    """The camera-encoding study's model and data (see the module docstring)."""

    task = "novel-view"
    datasets = ("camera-scenes",)
    best = ("psnr", "max")
    options_type = NovelViewOptions
    model_name = MODEL_NAME
    overrides_type = MultiViewOverrides

    def model_config(self, cfg: Config) -> MultiViewConfig:
        """The model's configuration: ``model.overrides`` at the data's image size."""
        o = self.overrides(cfg)
        size = (cfg.data.height, cfg.data.width)
        if size[0] % o.patch or size[1] % o.patch:
            raise UserError(f"config: data.height x data.width is {size[0]}x{size[1]}, not a "
                            f"multiple of model.overrides.patch ({o.patch})")
        return MultiViewConfig(image_size=size, **dataclasses.asdict(o))

    def check(self, cfg: Config) -> None:
        super().check(cfg)
        self.model_config(cfg)

    def build_model(self, cfg: Config) -> nn.Module:
        return MultiViewTransformer(self.model_config(cfg))

    def build_datasets(self, cfg: Config) -> tuple[Any, Any]:
        o, size = self.options(cfg), (cfg.data.height, cfg.data.width)
        train = make_scenes(o.scenes, o.views, o.zoom, o.scenes_seed, size, split="train")
        val = None
        if cfg.data.val_size > 0:
            test = make_scenes(cfg.data.val_size, o.context + o.targets, o.zoom,
                               o.scenes_seed + TEST_SEED_OFFSET, size, split="heldout")
            val = FixedViews(test, torch.arange(o.context),
                             torch.arange(o.context, o.context + o.targets))
        return RandomViews(train, cfg.data.train_size, o.context, o.targets, cfg.data.seed), val

    def collate(self, samples: Sequence[Mapping[str, torch.Tensor]]) -> Batch:
        return {key: torch.stack([s[key] for s in samples]) for key in KEYS}

    def forward(self, model: nn.Module, batch: Batch, cfg: Config) -> dict[str, Any]:
        return {"images": model(*(batch[key] for key in model.inputs))}

    def loss(self, outputs: dict[str, Any], batch: Batch, cfg: Config
             ) -> tuple[torch.Tensor, dict[str, float]]:
        loss = nn.functional.mse_loss(outputs["images"] / 255.0, batch["target_images"] / 255.0)
        return loss, {"loss": loss.item()}

    def predictor(self, model: nn.Module, cfg: Config, device: torch.device
                  ) -> Callable[[Mapping[str, Any]], np.ndarray]:
        return view_predictor(model, device)

    def metrics(self, cfg: Config) -> list[MetricSpec]:
        return [PSNR, SSIM]

    def export(self, model: nn.Module, path: Path, *, name: str, description: str,
               cfg: Config, step: int) -> list[Path]:
        config = {k: list(v) if isinstance(v, tuple) else v
                  for k, v in dataclasses.asdict(model.config).items()}
        path.parent.mkdir(parents=True, exist_ok=True)
        return [write_safetensors(path, model.state_dict(), TASK,
                                  {"name": name, "description": description, "steps": str(step),
                                   "config": json.dumps(config)})]


register_recipe(NovelViewRecipe())
