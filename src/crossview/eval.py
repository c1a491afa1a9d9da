"""Evaluate a predictor on a dataset with the benchmark's own metrics.

The loop knows nothing about models: a *predictor* is any callable ``sample -> prediction``
(disparity ``[H, W]`` for stereo, flow ``[H, W, 2]`` for flow, as numpy arrays or tensors of
those shapes), so the CLI wraps :mod:`crossview.api`, the training loop wraps its model for
validation, and tests use ground truth plus noise. Metric accumulation is
:class:`crossview.metrics.MetricAccumulator`, usable on its own.

>>> dataset, kind = open_dataset("kitti2015:/data/KITTI2015")        # doctest: +SKIP
>>> result = evaluate(dataset, predictor, get_metrics(kind.task, kind.metrics),
...                   reduction=kind.reduction)                        # doctest: +SKIP
>>> result.mean()["d1_all"]                                            # doctest: +SKIP
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch

from crossview.metrics.score import REDUCTIONS, MetricAccumulator, MetricSpec, Reduction

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
    "image_mean": ...}}``; ``reduction`` is the one the benchmark reports.
    """

    dataset: str
    task: str
    metrics: list[str]
    reduction: Reduction
    rows: list[tuple[str, dict[str, float]]]
    summary: dict[str, dict[str, float]]

    def mean(self) -> dict[str, float]:
        """``{metric: value}`` under the benchmark's own reduction."""
        return {name: self.summary[name][self.reduction] for name in self.metrics}

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
            "per_sample": [{"name": name, **{k: clean(v) for k, v in values.items()}}
                           for name, values in self.rows],
        }


def evaluate(dataset: Sequence[Mapping[str, Any]], predictor: Predictor,
             metrics: Sequence[MetricSpec], *, reduction: Reduction = "pooled",
             dataset_name: str = "", limit: int | None = None,
             on_sample: SampleCallback | None = None) -> EvalResult:
    """Run ``predictor`` on (the first ``limit``) samples of ``dataset`` and score it.

    Args:
        dataset: a sequence of sample dicts (numpy readers or torch synthetic datasets).
        predictor: ``sample -> prediction``; gets the numpy sample (see :func:`numpy_sample`).
        metrics: the specs to compute (all of one task).
        reduction: which reduction :meth:`EvalResult.mean` reports.
        on_sample: called after each sample with ``(index, name, values)`` (progress bars).
    """
    if reduction not in REDUCTIONS:
        raise ValueError(f"reduction must be one of {REDUCTIONS}, got {reduction!r}")
    tasks = {metric.task for metric in metrics}
    if len(tasks) > 1:
        raise ValueError(f"metrics of several tasks cannot be mixed: {sorted(tasks)}")
    if limit is not None and limit < 0:
        raise ValueError(f"limit must be non-negative, got {limit=}")
    count = len(dataset) if limit is None else min(limit, len(dataset))
    accumulator = MetricAccumulator(metrics)
    for index in range(count):
        sample = numpy_sample(dataset[index])
        name = str(sample.get("name", index))
        values = accumulator.update(_as_numpy(predictor(sample)), sample, name)
        if on_sample is not None:
            on_sample(index, name, values)
    return EvalResult(dataset_name, tasks.pop() if tasks else "", [m.name for m in metrics],
                      reduction, accumulator.rows, accumulator.summary())
