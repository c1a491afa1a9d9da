"""Evaluate a predictor on a dataset with the benchmark's own metrics.

The loop knows nothing about models: a *predictor* is any callable ``sample -> prediction``
(disparity ``[H, W]`` for stereo, flow ``[H, W, 2]`` for flow, as numpy arrays or tensors of
those shapes; other tasks define theirs with their metrics: keypoints ``[N, 2]`` for semantic
matching, rendered views for novel view synthesis), so the CLI wraps :mod:`crossview.api`, the
training loop wraps its model for validation (the recipe's predictor, see
:meth:`crossview.train.trainer.Trainer.validate`), the camera-encoding study scores its three
test settings, and tests use ground truth plus noise. Metric accumulation is
:class:`crossview.metrics.MetricAccumulator`, usable on its own.

Under torchrun (``dist_info``, see :mod:`crossview.distributed`) each rank scores every
``world_size``-th sample; the per-sample scores are gathered and merged in dataset order, so
every rank returns exactly the result of a one-process run.

>>> dataset, kind = open_dataset("kitti2015:/data/KITTI2015")        # doctest: +SKIP
>>> result = evaluate(dataset, predictor, get_metrics(kind.task, kind.metrics),
...                   reduction=kind.reduction)                        # doctest: +SKIP
>>> result.mean()["d1_all"]                                            # doctest: +SKIP
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import torch

from crossview.distributed import DistInfo, all_gather_objects, shard_strided
from crossview.errors import UserError
from crossview.metrics.score import REDUCTIONS, MetricAccumulator, MetricSpec, Reduction, Score

Predictor = Callable[[Mapping[str, Any]], Any]
SampleCallback = Callable[[int, str, dict[str, float]], None]


def numpy_sample(sample: Mapping[str, Any]) -> dict[str, Any]:
    """A sample with torch tensors turned into numpy arrays in the reader layout.

    Image tensors ``[3, H, W]`` become ``[H, W, 3]`` (values kept, 0..255) and flow tensors
    ``[2, H, W]`` become ``[H, W, 2]``; numpy samples pass through unchanged.
    """
    out: dict[str, Any] = {}
    for key, value in sample.items():
        if isinstance(value, torch.Tensor):
            value = value.detach().cpu().numpy()
            if (key.startswith("image") and value.ndim == 3 and value.shape[0] == 3) or (
                key.startswith("flow") and value.ndim == 3 and value.shape[0] == 2
            ):
                value = np.moveaxis(value, 0, -1)
        out[key] = value
    return out


def _as_numpy(prediction: Any) -> Any:
    if isinstance(prediction, torch.Tensor):
        return prediction.detach().float().cpu().numpy()
    return prediction


@dataclass
class EvalResult:
    """Per-sample metric values and their reductions over the dataset.

    ``rows`` is ``[(sample name, {metric: value})]``; ``summary`` is ``{metric: {"pooled": ...,
    "image_mean": ...}}``; ``reduction`` is the one the benchmark reports. ``categories`` holds
    the same summary over the samples of each category (samples with a ``"category"`` key,
    semantic benchmarks), in the order the categories first appear; empty otherwise.
    """

    dataset: str
    task: str
    metrics: list[str]
    reduction: Reduction
    rows: list[tuple[str, dict[str, float]]]
    summary: dict[str, dict[str, float]]
    categories: dict[str, dict[str, dict[str, float]]] = field(default_factory=dict)

    def mean(self) -> dict[str, float]:
        """``{metric: value}`` under the benchmark's own reduction."""
        return {name: self.summary[name][self.reduction] for name in self.metrics}

    def category_mean(self, category: str) -> dict[str, float]:
        """``{metric: value}`` over the samples of ``category``, under the benchmark's
        reduction."""
        return {name: self.categories[category][name][self.reduction] for name in self.metrics}

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready dict (NaN becomes ``None``)."""

        def clean(value: float) -> float | None:
            return None if math.isnan(value) else value

        return {
            "dataset": self.dataset, "task": self.task, "metrics": self.metrics,
            "reduction": self.reduction, "samples": len(self.rows),
            "mean": {name: clean(value) for name, value in self.mean().items()},
            "summary": {name: {key: clean(v) for key, v in values.items()}
                        for name, values in self.summary.items()},
            "categories": {category: {name: {key: clean(v) for key, v in values.items()}
                                      for name, values in summary.items()}
                           for category, summary in self.categories.items()},
            "per_sample": [{"name": name, **{k: clean(v) for k, v in values.items()}}
                           for name, values in self.rows],
        }


@dataclass(frozen=True)
class _RankFailure:
    """What a rank sends the others instead of its scores when its share failed."""

    rank: int
    message: str


# (dataset index, sample name, {metric: Score}, category or None) for each sample a rank scored
_Scored = list[tuple[int, str, dict[str, Score], str | None]]


def _merge(parts: list[_Scored | _RankFailure], metrics: Sequence[MetricSpec]
           ) -> tuple[MetricAccumulator, list[str | None]]:
    """One accumulator holding every rank's per-sample scores in dataset order, and the
    samples' categories in that order."""
    failures = [part for part in parts if isinstance(part, _RankFailure)]
    if failures:
        raise UserError(f"evaluation failed on rank {failures[0].rank}: {failures[0].message}")
    merged, categories = MetricAccumulator(metrics), []
    for _, name, scores, category in sorted((item for part in parts for item in part),
                                            key=lambda item: item[0]):
        merged.add(scores, name)
        categories.append(category)
    return merged, categories


def _category_summaries(accumulator: MetricAccumulator, categories: list[str | None]
                        ) -> dict[str, dict[str, dict[str, float]]]:
    """The accumulator's summary over the samples of each category (none without any)."""
    if any(category is None for category in categories):
        return {}
    return {category: accumulator.summary(
        [i for i, other in enumerate(categories) if other == category])
        for category in dict.fromkeys(categories)}


def evaluate(dataset: Sequence[Mapping[str, Any]], predictor: Predictor,
             metrics: Sequence[MetricSpec], *, reduction: Reduction = "pooled",
             dataset_name: str = "", limit: int | None = None,
             on_sample: SampleCallback | None = None,
             dist_info: DistInfo | None = None) -> EvalResult:
    """Run ``predictor`` on (the first ``limit``) samples of ``dataset`` and score it.

    Args:
        dataset: a sequence of sample dicts (numpy readers or torch synthetic datasets).
        predictor: ``sample -> prediction``; gets the numpy sample (see :func:`numpy_sample`).
        metrics: the specs to compute (all of one task).
        reduction: which reduction :meth:`EvalResult.mean` reports.
        on_sample: called after each sample this process scores, with ``(index, name,
            values)`` (progress bars).
        dist_info: this process's rank in an initialised process group: it scores samples
            ``rank, rank + world_size, ...`` and every rank returns the merged result. A rank
            whose share fails tells the others (they raise a :class:`UserError` naming it)
            before it re-raises, so no rank waits forever.
    """
    if reduction not in REDUCTIONS:
        raise ValueError(f"reduction must be one of {REDUCTIONS}, got {reduction!r}")
    tasks = {metric.task for metric in metrics}
    if len(tasks) > 1:
        raise ValueError(f"metrics of several tasks cannot be mixed: {sorted(tasks)}")
    if limit is not None and limit < 0:
        raise ValueError(f"limit must be non-negative, got {limit=}")
    info = dist_info if dist_info is not None else DistInfo()
    count = len(dataset) if limit is None else min(limit, len(dataset))
    accumulator, categories = MetricAccumulator(metrics), []
    indices = shard_strided(count, info)
    try:
        for index in indices:
            sample = numpy_sample(dataset[index])
            name = str(sample.get("name", index))
            values = accumulator.update(_as_numpy(predictor(sample)), sample, name)
            categories.append(sample.get("category"))
            if on_sample is not None:
                on_sample(index, name, values)
    except Exception as error:
        all_gather_objects(_RankFailure(info.rank, f"{type(error).__name__}: {error}"), info)
        raise
    if info.enabled:
        scored = [(index, name, scores, category) for index, (name, _), scores, category
                  in zip(indices, accumulator.rows, accumulator.sample_scores(), categories,
                         strict=True)]
        accumulator, categories = _merge(all_gather_objects(scored, info), metrics)
    return EvalResult(dataset_name, tasks.pop() if tasks else "", [m.name for m in metrics],
                      reduction, accumulator.rows, accumulator.summary(),
                      _category_summaries(accumulator, categories))
