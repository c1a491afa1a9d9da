"""The TransforMatcher recipe: keypoint transfer on synthetic warps of photographs.

Semantic-correspondence datasets cannot be downloaded here, so the refinement is trained on
random warps (homography + thin-plate spline + colour jitter, :mod:`crossview.data.synthetic.warps`)
of the training photographs, with keypoints drawn from the exact dense correspondence, and the
loss of Eq. 12 (mean distance of soft-sampled keypoints, ``tau = 0.1``, normalised coordinates),
plus ``recipe.dense_weight`` times
:func:`~crossview.models.transformatcher.loss.dense_loss` (ours). Images are ``16 * grid`` pixels
square (``model.overrides.grid``; ``data.height``/``data.width`` are not used). The warps and
their batches come from :mod:`crossview.data.synthetic.warp_batches`, the losses from
:mod:`crossview.models.transformatcher.loss`, the exported weights file from
:mod:`crossview.models.transformatcher.bundle`: this module only puts them together.

The backbone keeps its ImageNet weights unless ``recipe.backbone_lr`` > 0 fine-tunes the layers
that feed the correlation in their own parameter group (as the paper does, at 1e-5); its
BatchNorm statistics stay frozen either way. The paper's optimiser is Adam at a constant rate:
``optim: {weight_decay: 0, schedule: constant, grad_clip: 0}`` (configs/transformatcher.yaml).

Validation: PCK@0.05 / @0.1 (``img`` threshold) of the transferred keypoints on warps of the
training photographs with another seed (``data.seed + 1000``), through
:func:`crossview.eval.evaluate`; ``best.pt`` is the highest PCK@0.05. The held-out photographs
stay unseen (:func:`crossview.experiments.semantic_warps.evaluate_warps` scores them).
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
from crossview.data.synthetic.textures import image_names
from crossview.data.synthetic.warp_batches import stack_warps, warp_dataset
from crossview.errors import UserError
from crossview.metrics.registry import get_metrics
from crossview.metrics.score import MetricSpec
from crossview.models.keypoints.coordinates import normalised_to_pixels, pixels_to_normalised
from crossview.models.transformatcher.bundle import export_transformatcher
from crossview.models.transformatcher.loss import dense_loss, keypoint_loss
from crossview.models.transformatcher.model import TASK, TransforMatcher
from crossview.models.weights import read_state_dict
from crossview.train.config import Config
from crossview.train.recipe import Batch, Recipe, image_tensor, register_recipe

MODEL_NAME = "transformatcher"
TRAIN_TAU = 0.1  # soft-sampler temperature in training (the paper's; 0.05 at evaluation)
VALIDATION_SEED_OFFSET = 1000
_PCK = ("pck@0.05_img", "pck@0.1_img")


@dataclass
class TransforMatcherOverrides:
    """What ``model.overrides`` may set for ``model.name: transformatcher``."""

    grid: int = settings.setting(10, low=1)
    attention: str = settings.setting("additive", choices=("additive", "standard"))
    placement: bool = False
    depth: int = settings.setting(6, low=1)

    def __post_init__(self) -> None:
        settings.check(self)


@dataclass
class SemanticOptions:
    """The ``recipe`` section of a semantic run.

    ``keypoints``: pairs per training warp; ``shift``: the source view of the training warps
    is also translated by up to this fraction of the size per axis (:attr:`WarpConfig.shift`;
    ours, 0: none); ``dense_weight``: weight of :func:`dense_loss` (ours; 0: Eq. 12 only);
    ``backbone_lr``: peak rate of the backbone layers that feed the correlation (paper: 1e-5;
    0: frozen backbone).
    """

    keypoints: int = settings.setting(64, low=1)
    shift: float = settings.setting(0.0, low=0, high=1, high_open=True)
    dense_weight: float = settings.setting(0.0, low=0)
    backbone_lr: float = settings.setting(0.0, low=0)

    def __post_init__(self) -> None:
        settings.check(self)


class SemanticRecipe(Recipe):
    """TransforMatcher on synthetic warps (see the module docstring)."""

    task = "semantic"
    datasets = ("synthetic-warps",)
    best = ("pck@0.05_img", "max")
    options_type = SemanticOptions
    model_name = MODEL_NAME
    overrides_type = TransforMatcherOverrides

    def build_model(self, cfg: Config) -> nn.Module:
        o = self.overrides(cfg)
        return TransforMatcher(grid=o.grid, attention=o.attention, placement=o.placement,
                               depth=o.depth)

    def build_datasets(self, cfg: Config) -> tuple[Any, Any]:
        size, options = 16 * self.overrides(cfg).grid, self.options(cfg)
        train = warp_dataset("train", size, cfg.data.train_size, cfg.data.seed,
                             options.keypoints, options.shift)
        val = None
        if cfg.data.val_size > 0:
            val = warp_dataset("train", size, cfg.data.val_size,
                               cfg.data.seed + VALIDATION_SEED_OFFSET, options.keypoints)
        return train, val

    def load_init_weights(self, model: nn.Module, path: str | Path, *, grow: bool) -> None:
        """Weights of a TransforMatcher (``.safetensors``, task ``semantic``); the
        absolute-placement embedding may be missing from them when the model has it (it
        starts at zero)."""
        try:
            model.load_trained_state_dict(read_state_dict(path, task=TASK),
                                          grow=model.refiner.place is not None)
        except ValueError as error:
            raise UserError(f"--init-weights {path}: {error}") from None

    def param_groups(self, model: nn.Module, cfg: Config) -> list[dict[str, Any]]:
        groups = super().param_groups(model, cfg)  # the refinement, before the backbone
        rate = self.options(cfg).backbone_lr
        if rate > 0:
            groups.append({"params": model.tune_backbone(), "lr": rate})
        return groups

    def collate(self, samples: Sequence[Mapping[str, torch.Tensor]]) -> Batch:
        return stack_warps(samples)

    def forward(self, model: nn.Module, batch: Batch, cfg: Config) -> dict[str, Any]:
        out = model(batch["src"], batch["tgt"])
        size = model.image_size
        return {**out, "frame_shift": model.frame_shift, "beta": model.log_beta.exp(),
                "pred": model.transfer(out["coords"],
                                       pixels_to_normalised(batch["kp_src"], size, size),
                                       TRAIN_TAU)}

    def loss(self, outputs: dict[str, Any], batch: Batch, cfg: Config
             ) -> tuple[torch.Tensor, dict[str, float]]:
        size = batch["src"].shape[-1]
        loss = keypoint_loss(outputs["pred"], pixels_to_normalised(batch["kp_tgt"], size, size))
        weight = self.options(cfg).dense_weight
        if weight > 0:
            loss = loss + weight * dense_loss(outputs["coords"], batch["flow"], batch["valid"],
                                              outputs["frame_shift"])
        return loss, {"loss": loss.item(), "beta": outputs["beta"].item()}

    def predictor(self, model: nn.Module, cfg: Config, device: torch.device
                  ) -> Callable[[Mapping[str, Any]], np.ndarray]:
        size = model.image_size

        def predict(sample: Mapping[str, Any]) -> np.ndarray:
            coords = model(image_tensor(sample["image0"], device),
                           image_tensor(sample["image1"], device))["coords"]
            points = torch.from_numpy(np.asarray(sample["keypoints0"], np.float32)).to(device)
            kp = pixels_to_normalised(points[None], size, size)
            transferred = model.transfer(coords.float(), kp, model.eval_tau)[0]
            return normalised_to_pixels(transferred, size, size).cpu().numpy()

        return predict

    def metrics(self, cfg: Config) -> list[MetricSpec]:
        return get_metrics("semantic", _PCK)

    def export(self, model: nn.Module, path: Path, *, name: str, description: str,
               cfg: Config, step: int) -> list[Path]:
        o, options = self.overrides(cfg), self.options(cfg)
        meta = {"name": name, "description": description, "train_grid": str(o.grid),
                "steps": str(step), "seed": str(cfg.train.seed), "data_seed": str(cfg.data.seed),
                "attention": o.attention, "placement": str(o.placement),
                "backbone_lr": f"{options.backbone_lr:g}", "shift": f"{options.shift:g}",
                "train_images": ",".join(image_names("train"))}
        return [export_transformatcher(model, path, meta)]


register_recipe(SemanticRecipe())
