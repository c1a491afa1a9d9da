"""Scores that add up over a dataset, and the accumulator every evaluation loop uses.

A metric evaluated on one sample returns a :class:`Score` ``(total, count)``: the sum of a
per-pixel quantity over the evaluated pixels and the number of those pixels. The per-sample
value is ``total / count``. Over a dataset two reductions exist and benchmarks disagree on
which they use, so :class:`MetricAccumulator` keeps both:

- ``pooled``: ``sum(total) / sum(count)`` over all samples, i.e. every evaluated *pixel* of the
  dataset weighs the same (KITTI devkit, Sintel, FlyingChairs);
- ``image_mean``: the mean of the per-sample values over samples that have at least one
  evaluated pixel, i.e. every *image* weighs the same (Middlebury, ETH3D, SceneFlow practice).

Holes. A missing or non-finite prediction at an evaluated pixel (a "hole", such as the pixels
OpenCV's SGBM leaves without a disparity) makes a metric NaN by default, so a broken model
cannot pass unnoticed. With ``count_holes=True`` a hole counts as an error instead
(:func:`mark_holes`, :func:`hole_free_errors`): it is an outlier at every threshold (bad-N,
D1, Fl, N-px outliers; never "accurate"), and it adds ``|gt|`` to the end-point error, the
error of predicting no disparity or no motion. This is how classical methods that leave holes
are compared with dense ones (the real scenes of ``crossview eval --dataset scenes:PATH``).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

import numpy as np

Reduction = Literal["pooled", "image_mean"]
REDUCTIONS: tuple[Reduction, ...] = ("pooled", "image_mean")


@dataclass(frozen=True)
class Score:
    """``total`` of a per-pixel quantity over ``count`` evaluated pixels of one sample."""

    total: float
    count: int

    @property
    def value(self) -> float:
        """``total / count``; NaN when no pixel was evaluated."""
        return self.total / self.count if self.count else math.nan

    def __add__(self, other: Score) -> Score:
        return Score(self.total + other.total, self.count + other.count)


def percentage(hits: np.ndarray, errors: np.ndarray) -> Score:
    """``Score(100 * count(hits), errors.size)`` for a per-pixel test ``hits`` on ``errors``
    (both 1-D over the evaluated pixels).

    A NaN error (a NaN prediction) fails every comparison, so it would silently count as a good
    pixel for "error > t" metrics; instead the total becomes NaN, as it does for a mean error.
    """
    if np.isnan(errors).any():
        return Score(math.nan, int(errors.size))
    return Score(100.0 * float(np.count_nonzero(hits)), int(errors.size))


def mark_holes(errors: np.ndarray) -> np.ndarray:
    """``errors`` ``[N]`` with every non-finite entry (a hole) set to ``+inf``, so that every
    "error > t" test counts it as an outlier and every "error < t" test as a miss."""
    return np.where(np.isfinite(errors), errors, np.inf)


def hole_free_errors(errors: np.ndarray, magnitude: np.ndarray) -> np.ndarray:
    """``errors`` ``[N]`` (from :func:`mark_holes`) with each hole's ``inf`` replaced by
    ``magnitude`` ``[N]`` (``|gt|``): a mean needs a finite error, and ``|gt|`` is the error of
    predicting zero disparity / zero motion there."""
    return np.where(np.isinf(errors), magnitude, errors)


@dataclass(frozen=True)
class MetricSpec:
    """A named metric: ``fn(prediction, sample) -> Score``.

    ``prediction`` is disparity ``[H, W]`` (task "stereo") or flow ``[H, W, 2]`` (task "flow")
    as numpy arrays; ``sample`` is a dataset sample dict holding the ground truth and masks.
    """

    name: str
    task: str
    fn: Callable[[Any, Mapping[str, Any]], Score]
    description: str
    unit: str = ""


@dataclass
class MetricAccumulator:
    """Evaluate ``metrics`` sample by sample and reduce them over the dataset.

    A toy metric: the prediction's absolute error, counted once per pixel of the sample.

    >>> error = MetricSpec("err", "toy", lambda prediction, sample: Score(
    ...     abs(prediction - sample["answer"]) * sample["pixels"], sample["pixels"]), "error")
    >>> acc = MetricAccumulator([error])
    >>> acc.update(5.0, {"answer": 7.0, "pixels": 4})  # per-sample values, also in acc.rows
    {'err': 2.0}
    >>> acc.update(1.0, {"answer": 1.0, "pixels": 1})
    {'err': 0.0}
    >>> acc.summary()["err"]  # per pixel: 8 / 5; per image: (2 + 0) / 2
    {'pooled': 1.6, 'image_mean': 1.0}
    """

    metrics: Sequence[MetricSpec]
    rows: list[tuple[str, dict[str, float]]] = field(default_factory=list)
    _scores: dict[str, list[Score]] = field(default_factory=dict)

    def update(self, prediction: Any, sample: Mapping[str, Any], name: str | None = None
               ) -> dict[str, float]:
        """Score one sample; return and record ``{metric name: per-sample value}``."""
        return self.add({metric.name: metric.fn(prediction, sample) for metric in self.metrics},
                        name)

    def add(self, scores: Mapping[str, Score], name: str | None = None) -> dict[str, float]:
        """Record one sample's ``{metric name: Score}``, scored here or by another process
        (merging the per-sample scores in dataset order reproduces a one-process run exactly)."""
        for metric_name, score in scores.items():
            self._scores.setdefault(metric_name, []).append(score)
        values = {metric_name: score.value for metric_name, score in scores.items()}
        self.rows.append((name if name is not None else str(len(self.rows)), values))
        return values

    def sample_scores(self) -> list[dict[str, Score]]:
        """``{metric name: Score}`` of each recorded sample, in order (what :meth:`add` takes)."""
        return [{name: scores[i] for name, scores in self._scores.items()}
                for i in range(len(self.rows))]

    def totals(self) -> dict[str, Score]:
        """The pooled :class:`Score` of each metric (sum these across processes to reduce)."""
        return {name: sum(scores, Score(0.0, 0)) for name, scores in self._scores.items()}

    def summary(self, samples: Sequence[int] | None = None) -> dict[str, dict[str, float]]:
        """``{metric: {"pooled": ..., "image_mean": ...}}`` over the samples seen so far, or over
        the recorded samples of index ``samples`` (NaN for a metric that has seen none)."""
        out = {}
        for name in dict.fromkeys([*(metric.name for metric in self.metrics), *self._scores]):
            scores = self._scores.get(name, [])
            if samples is not None:
                scores = [scores[i] for i in samples]
            per_image = [score.value for score in scores if score.count]
            out[name] = {
                "pooled": sum(scores, Score(0.0, 0)).value,
                "image_mean": math.fsum(per_image) / len(per_image) if per_image else math.nan,
            }
        return out
