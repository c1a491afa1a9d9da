"""What a stereo/flow :class:`~crossview.train.config.Config` names, built: datasets, model,
init weights (for the recipe of :mod:`crossview.train.recipes.fields`).

Dataset names: ``synthetic-stereo`` and ``synthetic-flow`` (the seeded engine of
:mod:`crossview.data.synthetic`, rendered at ``data.height x data.width``). Training uses the
``train`` split with ``data.seed`` (augmented as ``data.augment`` says); validation the same
split with seed ``data.seed + 1000`` (an unrelated stream), so the held-out benchmarks
(split ``heldout``) stay unseen.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import torch
from torch.utils.data import Dataset

from crossview import settings
from crossview.data.augment import Augmentor, flow_augmentor, stereo_augmentor
from crossview.data.camera_effects import CameraEffects
from crossview.data.real_stereo import MixedStream, RealStereoTraining, RealStereoValidation
from crossview.data.synthetic.flow import FlowConfig, SyntheticFlow
from crossview.data.synthetic.stereo import StereoConfig, SyntheticStereo
from crossview.errors import UserError
from crossview.models.registry import get_spec
from crossview.models.weights import load_weights, read_state_dict
from crossview.train.config import Config
from crossview.train.grow import grow_into

VALIDATION_SEED_OFFSET = 1000


def stereo_training_sample(sample: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    """A synthetic stereo sample -> the trainer's layout, ground truth for both views.

    ``gt [2, H, W, 2]``: left ``(-disparity, 0)``, right ``(+disparity1, 0)``;
    ``valid [2, H, W]`` from ``valid``/``valid1``.
    """
    zeros = torch.zeros_like(sample["disparity"])
    gt = torch.stack([torch.stack([-sample["disparity"], zeros], dim=-1),
                      torch.stack([sample["disparity1"], zeros], dim=-1)])
    valid = torch.stack([sample["valid"], sample["valid1"]])
    return {"img0": sample["image0"], "img1": sample["image1"], "gt": gt, "valid": valid}


def flow_training_sample(sample: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    """A synthetic flow sample -> the trainer's layout, ground truth for both frames.

    ``gt [2, H, W, 2]``: forward flow (frame 0 -> 1) then backward flow (1 -> 0), channel-last;
    ``valid [2, H, W]`` from ``valid``/``valid1``.
    """
    gt = torch.stack([sample["flow"].permute(1, 2, 0), sample["flow_backward"].permute(1, 2, 0)])
    valid = torch.stack([sample["valid"], sample["valid1"]])
    return {"img0": sample["image0"], "img1": sample["image1"], "gt": gt, "valid": valid}


class TrainingView(Dataset):
    """A dataset whose samples are converted to the trainer's layout on access."""

    def __init__(self, dataset: Any, convert: Any) -> None:
        self.dataset = dataset
        self.convert = convert

    def __len__(self) -> int:
        return len(self.dataset)

    def __getitem__(self, index: int) -> dict[str, torch.Tensor]:
        return self.convert(self.dataset[index])


# real stereo pairs read as flow: RAFT-Stereo's scale range, always rescaled
REAL_FLOW_SCALE = {"min_scale": -0.2, "max_scale": 0.4, "spatial_probability": 1.0}


def _augmentor(task: str, augment: str, crop: tuple[int, int], **overrides: object
               ) -> Augmentor | None:
    """The training transform that ``data.augment`` names (None for ``none``)."""
    if augment == "none":
        return None
    camera = CameraEffects() if augment == "camera" else None
    make = stereo_augmentor if task == "stereo" else flow_augmentor
    return make(crop, camera=camera, **overrides)


def _synthetic(name: str, length: int, seed: int, size: tuple[int, int],
               transform: Augmentor | None = None, street: float = 0.0) -> TrainingView:
    if name == "synthetic-stereo":
        config = StereoConfig(size=size, street_probability=street)
        return TrainingView(SyntheticStereo(length, seed=seed, config=config,
                                            transform=transform), stereo_training_sample)
    if name == "synthetic-flow":
        config = FlowConfig(size=size, street_probability=street)
        return TrainingView(SyntheticFlow(length, seed=seed, config=config,
                                          transform=transform), flow_training_sample)
    raise ValueError(f"no synthetic dataset {name!r}: the recipe's check lets none other pass")


def build_datasets(cfg: Config) -> tuple[TrainingView, TrainingView | None]:
    """The training and validation sets named by ``cfg.data``; only training samples are
    augmented (validation stays the clean render, comparable across recipes)."""
    data = cfg.data
    size = (data.height, data.width)
    transform = _augmentor(cfg.task, data.augment, size)
    render = size
    if transform is not None:
        render = (round(data.height * data.render_scale), round(data.width * data.render_scale))
    if data.train == "real-scenes":
        train = _real_training(cfg)
    else:
        train = _synthetic(data.train, data.train_size, data.seed, render, transform,
                           data.street_probability)
        if data.real_scenes:
            train = MixedStream(train, _real_training(cfg), data.real_fraction)
    val = None
    if data.val == "real-scenes":
        val = _real_validation(cfg)
    elif data.val_size > 0:
        val = _synthetic(data.val, data.val_size, data.seed + VALIDATION_SEED_OFFSET, size)
    return train, val


def _real_training(cfg: Config) -> TrainingView:
    """Augmented crops of the real scenes ``data.real_scenes`` minus ``data.real_holdout``,
    stereo or (task flow) the stereo pairs as flow (cropping needs the spatial augmentation,
    so ``augment: none`` means ``standard`` here). Flow crops keep the stereo scale range
    (:data:`REAL_FLOW_SCALE`): the scenes' motions are already large, and RAFT's up-to-2x
    zoom would push many of them past the crop."""
    data = cfg.data
    if not data.real_scenes:
        raise UserError("config: real-scenes training needs data.real_scenes (a folder of real "
                        "stereo scene folders)")
    scale = REAL_FLOW_SCALE if cfg.task == "flow" else {}
    transform = _augmentor(cfg.task, "standard" if data.augment == "none" else data.augment,
                           (data.height, data.width), **scale)
    real = RealStereoTraining(data.real_scenes, data.train_size, seed=data.seed,
                              holdout=data.real_holdout, transform=transform, task=cfg.task)
    return TrainingView(real, _training_sample(cfg.task))


def _real_validation(cfg: Config) -> TrainingView:
    data = cfg.data
    if not data.real_scenes or not data.real_holdout:
        raise UserError("config: data.val real-scenes validates on data.real_holdout, scenes "
                        "of data.real_scenes; set both")
    return TrainingView(RealStereoValidation(data.real_scenes, data.real_holdout, cfg.task),
                        _training_sample(cfg.task))


def _training_sample(task: str) -> Any:
    """The converter of a task's samples to the trainer's layout."""
    return stereo_training_sample if task == "stereo" else flow_training_sample


def build_model(cfg: Config) -> torch.nn.Module:
    """The registry model ``cfg.model.name`` (randomly initialised), its configuration
    fields replaced by ``cfg.model.overrides``, each checked like the configuration's own
    fields (``config: model.overrides.heads must be >= 1, got 0``)."""
    spec = get_spec(cfg.model.name)
    if spec.task != cfg.task:
        raise UserError(f"model {cfg.model.name!r} is a {spec.task} model but the config's "
                        f"task is {cfg.task!r}")
    try:
        return spec.build(**cfg.model.overrides)
    except settings.SettingError as error:
        # registry.configured names the fields "overrides.KEY": in the config they are
        # "model.overrides.KEY"
        message = str(error).replace("overrides", "model.overrides", 1)
        raise UserError(f"config: {message}") from None


def check_crop(model: torch.nn.Module, cfg: Config) -> None:
    """:class:`UserError` if the training crop ``data.height x data.width`` cannot go through
    ``model`` (MatchStereo trains on unpadded crops: multiples of 32, at least
    ``model.min_shape(task)``, :mod:`crossview.models.dense.contract`). Models without it are
    not checked."""
    min_shape = getattr(model, "min_shape", None)
    if min_shape is None:
        return
    (h, w), (least_h, least_w) = (cfg.data.height, cfg.data.width), min_shape(cfg.task)
    if h % 32 or w % 32 or h < least_h or w < least_w:
        raise UserError(f"config: data.height x data.width is {h}x{w}, but {cfg.model.name!r} "
                        f"trains on crops whose sides are multiples of 32 and at least "
                        f"{least_h}x{least_w} for {cfg.task}")


def load_init_weights(model: torch.nn.Module, path: str | Path, *, grow: bool = False) -> None:
    """Fine-tuning: load a published ``.pth`` / state dict / ``.safetensors`` into ``model``
    (strictly, with the model engineer's loader); with ``grow``, the weights of a network with
    fewer decoder layers or encoder blocks, the extra ones starting as the identity."""
    if grow:
        grow_into(model, read_state_dict(path, task=getattr(model, "task", None)),
                  source=str(path))
    else:
        load_weights(model, path)
