"""The MatchStereo / MatchFlow recipe: fields of both views, the paper's losses, EPE.

Training samples are dicts: ``img0``, ``img1`` ``[3, H, W]`` float in 0..255; ``gt`` the
reference-view field ``[H, W, 2]`` (or both views, ``[2, H, W, 2]``); ``valid`` ``[H, W]`` (or
``[2, H, W]``) bool (:mod:`crossview.train.build` makes them from the synthetic engine). Models
provide ``forward_fields(img0, img1, task=...)``; the losses are
:func:`crossview.train.losses.training_loss`. Validation scores the reference view with the
registry's ``epe`` (and ``bad2`` for stereo, the disparity being ``max(-x, 0)``), pooled over
the validation pixels; ``best.pt`` is the lowest EPE.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import torch
from torch import nn

from crossview.attention.match import NonFiniteError
from crossview.metrics.registry import get_metrics
from crossview.metrics.score import MetricSpec
from crossview.train import build
from crossview.train.checkpoint import export_weights
from crossview.train.config import Config
from crossview.train.losses import training_loss
from crossview.train.recipe import Batch, Recipe, image_tensor

_KEYS = ("img0", "img1", "gt", "valid")


def collate(samples: Sequence[Mapping[str, torch.Tensor]]) -> Batch:
    """Stack samples; both-view ground truth becomes ``[2B, ...]``, reference rows first."""
    batch = {key: torch.stack([s[key] for s in samples]) for key in _KEYS}
    if batch["gt"].dim() == 5:  # [B, 2, H, W, 2]
        batch["gt"] = batch["gt"].transpose(0, 1).flatten(0, 1)
        batch["valid"] = batch["valid"].transpose(0, 1).flatten(0, 1)
    return batch


class FieldRecipe(Recipe):
    """Stereo (``task="stereo"``) or optical flow (``task="flow"``) with MatchStereo models."""

    best = ("epe", "min")

    def __init__(self, task: str) -> None:
        self.task = task
        self.datasets = (f"synthetic-{task}",)

    def build_model(self, cfg: Config) -> nn.Module:
        return build.build_model(cfg)

    def check_model(self, model: nn.Module, cfg: Config) -> None:
        build.check_crop(model, cfg)

    def build_datasets(self, cfg: Config) -> tuple[Any, Any]:
        return build.build_datasets(cfg)

    def load_init_weights(self, model: nn.Module, path: str | Path, *, grow: bool) -> None:
        build.load_init_weights(model, path, grow=grow)

    def collate(self, samples: Sequence[Mapping[str, torch.Tensor]]) -> Batch:
        return collate(samples)

    def forward(self, model: nn.Module, batch: Batch, cfg: Config) -> dict[str, Any]:
        return model.forward_fields(batch["img0"], batch["img1"], task=self.task)

    def loss(self, outputs: dict[str, Any], batch: Batch, cfg: Config
             ) -> tuple[torch.Tensor, dict[str, float]]:
        return training_loss(outputs, batch["gt"], batch["valid"], self.task, cfg.loss)

    def validation_sample(self, sample: Mapping[str, Any]) -> dict[str, Any]:
        """Trainer layout -> reader layout: ``image0``/``image1`` and the reference view's
        ``disparity [H, W]`` (stereo) or ``flow [H, W, 2]`` (flow) with its ``valid``."""
        gt, valid = sample["gt"], sample["valid"]
        if gt.dim() == 4:  # both views: the reference view is scored
            gt, valid = gt[0], valid[0]
        out = {"image0": sample["img0"], "image1": sample["img1"], "valid": valid.numpy()}
        if self.task == "stereo":
            out["disparity"] = (-gt[..., 0]).numpy()
        else:
            out["flow"] = gt.numpy()
        return out

    def predictor(self, model: nn.Module, cfg: Config, device: torch.device
                  ) -> Callable[[Mapping[str, Any]], np.ndarray]:
        def predict(sample: Mapping[str, Any]) -> np.ndarray:
            try:
                field = model.forward_fields(image_tensor(sample["image0"], device),
                                             image_tensor(sample["image1"], device),
                                             task=self.task)["field"][0].float().cpu().numpy()
            except NonFiniteError:  # diverged weights: the metrics say so, the guard stops
                field = np.full((*sample["image0"].shape[:2], 2), np.nan, np.float32)
            return (-field[..., 0]).clip(min=0.0) if self.task == "stereo" else field

        return predict

    def metrics(self, cfg: Config) -> list[MetricSpec]:
        return get_metrics(self.task, ("epe", "bad2") if self.task == "stereo" else ("epe",))

    def export_paths(self, path: Path) -> list[Path]:
        return [path, path.with_suffix(".json")]

    def export(self, model: nn.Module, path: Path, *, name: str, description: str,
               cfg: Config, step: int) -> list[Path]:
        return list(export_weights(model, path, name=name, task=self.task,
                                   description=description))
