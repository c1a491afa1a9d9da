"""The MatchStereo / MatchFlow recipe: fields of both views, the paper's losses, EPE.

Training samples are dicts: ``img0``, ``img1`` ``[3, H, W]`` float in 0..255; ``gt`` the
reference-view field ``[H, W, 2]`` (or both views, ``[2, H, W, 2]``); ``valid`` ``[H, W]`` (or
``[2, H, W]``) bool (:mod:`crossview.train.build` makes them from the synthetic engine). Models
provide ``forward_fields(img0, img1, task=...)``; the losses are
:func:`crossview.train.losses.training_loss`. Validation scores the reference view with the
registry's ``epe`` (and ``bad2`` for stereo, the disparity being ``max(-x, 0)``), pooled over
the validation pixels; ``best.pt`` is the lowest EPE. TensorBoard shows the predicted disparity
or flow of the first validation samples beside their ground truth (:meth:`FieldRecipe.preview`).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import torch
from torch import nn

from crossview.attention.match import NonFiniteError
from crossview.data.datasets.image_sequences import ImageSequencePairs
from crossview.data.datasets.stereo_pairs import UnlabelledStereoPairs
from crossview.errors import UserError
from crossview.metrics.registry import get_metrics
from crossview.metrics.score import MetricSpec
from crossview.models.matchstereo.bundle import write_bundle
from crossview.models.matchstereo.model import MatchStereo
from crossview.models.registry import get_spec
from crossview.train import build
from crossview.train.config import Config
from crossview.train.losses import training_loss
from crossview.train.photometric import photometric_loss
from crossview.train.recipe import Batch, Recipe, image_tensor, register_recipe
from crossview.viz import disparity_to_colour, flow_to_colour

_KEYS = ("img0", "img1", "gt", "valid")
_GAP = 4  # px of white between the pictures of a preview
_NO_TRUTH = (0, 0, 0)  # the colour of ground-truth pixels without a value


def collate(samples: Sequence[Mapping[str, torch.Tensor]]) -> Batch:
    """Stack samples; both-view ground truth becomes ``[2B, ...]``, reference rows first."""
    batch = {key: torch.stack([s[key] for s in samples]) for key in _KEYS}
    if batch["gt"].dim() == 5:  # [B, 2, H, W, 2]
        batch["gt"] = batch["gt"].transpose(0, 1).flatten(0, 1)
        batch["valid"] = batch["valid"].transpose(0, 1).flatten(0, 1)
    return batch


def _side_by_side(pictures: Sequence[np.ndarray]) -> np.ndarray:
    """``[H_i, W_i, 3]`` uint8 pictures left to right, ``_GAP`` px of white between them, the
    shorter ones padded with white below."""
    height = max(p.shape[0] for p in pictures)
    width = sum(p.shape[1] for p in pictures) + _GAP * (len(pictures) - 1)
    canvas = np.full((height, width, 3), 255, np.uint8)
    x = 0
    for picture in pictures:
        canvas[:picture.shape[0], x:x + picture.shape[1]] = picture
        x += picture.shape[1] + _GAP
    return canvas


def _truth(sample: Mapping[str, Any], key: str) -> tuple[np.ndarray | None, np.ndarray | None]:
    """The ground truth ``key`` of a numpy validation sample and where it holds a finite value
    (``valid`` and finite), or ``(None, None)`` when the sample has none."""
    truth = sample.get(key)
    if truth is None:
        return None, None
    truth = np.asarray(truth, np.float64)
    known = np.isfinite(truth) if truth.ndim == 2 else np.isfinite(truth).all(-1)
    if sample.get("valid") is not None:
        known &= np.asarray(sample["valid"], bool)
    return truth, known


def disparity_preview(prediction: np.ndarray, truth: np.ndarray | None = None,
                      known: np.ndarray | None = None) -> np.ndarray:
    """Predicted disparity ``[H, W]`` beside the ground truth ``truth [H, W]`` (if given; its
    pixels outside ``known [H, W]`` black), both on the ground truth's colour range (1st..99th
    percentile; the prediction's without ground truth), with one colour bar: ``[H, W', 3]``
    uint8."""
    prediction = np.asarray(prediction, np.float64)
    if truth is None:
        return disparity_to_colour(prediction)
    shown = np.where(known, truth, np.nan)
    values = shown[np.isfinite(shown)]
    if values.size == 0:
        values = prediction[np.isfinite(prediction)]
    low, high = ((float(np.percentile(values, 1)), float(np.percentile(values, 99)))
                 if values.size else (0.0, 1.0))
    w = prediction.shape[1]
    both = np.concatenate([prediction, np.full((len(prediction), _GAP), np.nan), shown], 1)
    picture = disparity_to_colour(both, vmin=low, vmax=high).copy()
    picture[:, w:w + _GAP] = 255
    picture[:, w + _GAP:2 * w + _GAP][~known] = _NO_TRUTH
    return picture


def flow_preview(prediction: np.ndarray, truth: np.ndarray | None = None,
                 known: np.ndarray | None = None) -> np.ndarray:
    """Predicted flow ``[H, W, 2]`` beside the ground truth ``truth [H, W, 2]`` (if given; its
    pixels outside ``known [H, W]`` black), both on the colour wheel scaled to the ground
    truth's largest magnitude (the prediction's without ground truth), with the wheel's key on
    the right: ``[H', W', 3]`` uint8."""
    prediction = np.asarray(prediction, np.float64)
    reference = prediction if truth is None else np.where(known[..., None], truth, 0.0)
    largest = float(np.nan_to_num(np.hypot(reference[..., 0], reference[..., 1])).max())
    max_flow = largest if largest > 0 else 1.0
    if truth is None:
        return flow_to_colour(prediction, max_flow, key=True)
    truth_picture = flow_to_colour(reference, max_flow, key=True).copy()
    truth_picture[:len(known), :known.shape[1]][~known] = _NO_TRUTH
    return _side_by_side([flow_to_colour(prediction, max_flow), truth_picture])


def pair_rows(outputs: dict[str, Any], pairs: range, total: int) -> dict[str, Any]:
    """A two-view forward's outputs restricted to some of its pairs.

    Every tensor of ``outputs`` (and of its lists) holding both views of ``total`` pairs on the
    batch axis (``[2 * total, ...]``, reference rows first) keeps the rows of ``pairs`` in both
    views; anything else passes unchanged.
    """
    rows = torch.tensor([*pairs, *(p + total for p in pairs)])

    def pick(value: Any) -> Any:
        if isinstance(value, torch.Tensor) and value.ndim > 0 and value.shape[0] == 2 * total:
            return value.index_select(0, rows.to(value.device))
        if isinstance(value, list):
            return [pick(v) for v in value]
        return value

    if len(pairs) == total:
        return outputs
    return {key: pick(value) for key, value in outputs.items()}


class FieldRecipe(Recipe):
    """Stereo (``task="stereo"``) or optical flow (``task="flow"``) with MatchStereo models."""

    best = ("epe", "min")

    def __init__(self, task: str) -> None:
        self.task = task
        self.datasets = (f"synthetic-{task}", "real-scenes")

    def build_model(self, cfg: Config) -> nn.Module:
        return build.build_model(cfg)

    def check_model(self, model: nn.Module, cfg: Config) -> None:
        build.check_crop(model, cfg)

    def build_datasets(self, cfg: Config) -> tuple[Any, Any]:
        return build.build_datasets(cfg)

    def load_init_weights(self, model: nn.Module, path: str | Path, *, grow: bool) -> None:
        build.load_init_weights(model, path, grow=grow)

    def unlabelled_set(self, cfg: Config
                       ) -> tuple[ImageSequencePairs | UnlabelledStereoPairs, int] | None:
        """The unlabelled real pairs of the self-supervised term, when it is on: frame pairs
        of image sequences (flow) or rectified stereo pairs (stereo) from ``data.real``."""
        if cfg.loss.photometric_weight == 0:
            return None
        crop = (cfg.data.height, cfg.data.width)
        if not cfg.data.real:
            what = ("image sequences" if self.task == "flow"
                    else "rectified stereo pairs, one folder each with left.png and right.png")
            raise UserError("config: loss.photometric_weight needs data.real (a folder of "
                            f"unlabelled {what})")
        if self.task == "flow":
            pairs: ImageSequencePairs | UnlabelledStereoPairs = ImageSequencePairs(
                cfg.data.real, cfg.data.train_size, crop, max_gap=cfg.data.real_max_gap,
                seed=cfg.data.seed)
        else:
            pairs = UnlabelledStereoPairs(cfg.data.real, cfg.data.train_size, crop,
                                          seed=cfg.data.seed)
        return pairs, cfg.data.real_batch_size

    def collate(self, samples: Sequence[Mapping[str, torch.Tensor]]) -> Batch:
        return collate(samples)

    def forward(self, model: nn.Module, batch: Batch, cfg: Config) -> dict[str, Any]:
        """Both views of every pair; unlabelled pairs (``unlabelled_img0/1``) run in the same
        forward after the labelled ones."""
        img0, img1 = batch["img0"], batch["img1"]
        if "unlabelled_img0" in batch:
            img0 = torch.cat([img0, batch["unlabelled_img0"]])
            img1 = torch.cat([img1, batch["unlabelled_img1"]])
        return model.forward_fields(img0, img1, task=self.task)

    def loss(self, outputs: dict[str, Any], batch: Batch, cfg: Config
             ) -> tuple[torch.Tensor, dict[str, float]]:
        """The paper's losses on the labelled pairs, plus ``loss.photometric_weight`` times
        the self-supervised term (:mod:`crossview.train.photometric`) on the unlabelled ones."""
        labelled = batch["img0"].shape[0]
        if "unlabelled_img0" not in batch:
            return training_loss(outputs, batch["gt"], batch["valid"], self.task, cfg.loss)
        pairs = labelled + batch["unlabelled_img0"].shape[0]
        loss, logs = training_loss(pair_rows(outputs, range(labelled), pairs), batch["gt"],
                                   batch["valid"], self.task, cfg.loss)
        field = pair_rows(outputs, range(labelled, pairs), pairs)["field"]
        term, real_logs = photometric_loss(batch["unlabelled_img0"], batch["unlabelled_img1"],
                                           field, smooth_weight=cfg.loss.smooth_weight)
        loss = loss + cfg.loss.photometric_weight * term
        logs.update(real_logs, loss=float(loss.detach()))
        return loss, logs

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

    def preview(self, sample: Mapping[str, Any], prediction: np.ndarray) -> np.ndarray:
        """The predicted disparity (:func:`disparity_preview`) or flow (:func:`flow_preview`)
        beside the sample's ground truth, if it has one."""
        if self.task == "stereo":
            return disparity_preview(prediction, *_truth(sample, "disparity"))
        return flow_preview(prediction, *_truth(sample, "flow"))

    def metrics(self, cfg: Config) -> list[MetricSpec]:
        return get_metrics(self.task, ("epe", "bad2") if self.task == "stereo" else ("epe",))

    def export_paths(self, path: Path) -> list[Path]:
        return [path, path.with_suffix(".json")]

    def export(self, model: nn.Module, path: Path, *, name: str, description: str,
               cfg: Config, step: int) -> list[Path]:
        if not isinstance(model, MatchStereo):  # the bundle describes a MatchStereo config
            raise UserError(f"--export writes MatchStereo / MatchFlow bundles; {cfg.model.name!r} "
                            "is another family (its checkpoints are in train.out_dir)")
        return list(write_bundle(model, path, name=name, task=self.task,
                                 description=description, like=get_spec(cfg.model.name)))


register_recipe(FieldRecipe("stereo"))
register_recipe(FieldRecipe("flow"))
