"""Named metrics (``"d1_all"``, ``"bad2_noc"``, ``"fl_all"`` ...) that evaluation loops can ask for.

Each :class:`~crossview.metrics.score.MetricSpec` reads its ground truth from the sample dict of
a dataset reader: stereo metrics use ``sample["disparity"]``, flow metrics ``sample["flow"]``;
the plain names evaluate on ``sample["valid"]`` (pixels with ground truth, "all"), the ``_noc``
names on ``sample["valid_noc"]`` (non-occluded pixels with ground truth). A name ending in
``_holes`` (``bad2_holes``, ``fl_all_noc_holes``) counts a missing or non-finite prediction as an
error instead of returning NaN (``count_holes=True``, see :mod:`crossview.metrics.score`). Every
module of this package registers its metrics (:func:`register_metric`, e.g. semantic PCK in
:mod:`.keypoints`); the registry finds them all on the first lookup.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Mapping, Sequence
from functools import partial
from typing import Any

from crossview.errors import UserError
from crossview.metrics import flow, stereo
from crossview.metrics.score import MetricSpec, Score
from crossview.registry import Registry, import_modules

# (task, name) -> spec; every module of this package registers its metrics
METRICS: Registry[tuple[str, str], MetricSpec] = Registry("metric",
                                                          import_modules("crossview.metrics"))
MASKS = {"": "valid", "_noc": "valid_noc"}
HOLES = {"": False, "_holes": True}  # name suffix -> count_holes


def register_metric(spec: MetricSpec) -> MetricSpec:
    """Add ``spec`` under ``(spec.task, spec.name)``; names are unique per task."""
    return METRICS.register((spec.task, spec.name), spec)


def list_metrics(task: str) -> list[str]:
    """The metric names available for ``task``."""
    return [name for (metric_task, name), _ in METRICS.items() if metric_task == task]


def get_metrics(task: str, names: Sequence[str]) -> list[MetricSpec]:
    """The specs of ``names`` for ``task``; an unknown name is a :class:`UserError`."""
    unknown = [name for name in names if (task, name) not in METRICS]
    if unknown:
        raise UserError(f"unknown {task} metric(s) {', '.join(unknown)}; "
                        f"known: {', '.join(list_metrics(task))}")
    return [METRICS.get((task, name)) for name in names]


def _masked(fn: Callable[..., Score], truth_key: str, mask_key: str
            ) -> Callable[[Any, Mapping[str, Any]], Score]:
    def evaluate(prediction: Any, sample: Mapping[str, Any]) -> Score:
        if mask_key not in sample:
            raise UserError(f"this dataset has no '{mask_key}' mask for the metric")
        return fn(prediction, sample[truth_key], sample[mask_key])

    return evaluate


def _register_builtins() -> None:
    for (suffix, mask), (hole_suffix, holes) in itertools.product(MASKS.items(), HOLES.items()):
        where = "all pixels with ground truth" if not suffix else "non-occluded pixels"
        where += "; a missing prediction is an error" if holes else ""
        suffix += hole_suffix
        for name, fn, what, unit in [
            ("epe", stereo.endpoint_error, "mean absolute disparity error", "px"),
            ("avgerr", stereo.endpoint_error, "Middlebury avgerr (= epe)", "px"),
            ("d1_all", stereo.d1, "KITTI D1: % error > 3 px and > 5% of gt", "%"),
            *[
                (f"bad{t:g}", partial(stereo.bad_pixels, threshold=t),
                 f"% with error > {t:g} px", "%")
                for t in (0.5, 1.0, 2.0, 3.0, 4.0)
            ],
        ]:
            register_metric(MetricSpec(
                name + suffix, "stereo", _masked(partial(fn, count_holes=holes), "disparity", mask),
                f"{what}, over {where}", unit))
        for name, fn, what, unit in [
            ("epe", flow.flow_endpoint_error, "mean end-point error", "px"),
            ("fl_all", flow.fl_all, "KITTI Fl: % EPE > 3 px and > 5% of |gt|", "%"),
            ("out3", partial(flow.flow_outliers, threshold=3.0), "% with EPE > 3 px", "%"),
            *[
                (f"{t}px", partial(flow.flow_accuracy, threshold=float(t)),
                 f"% with EPE < {t} px", "%")
                for t in (1, 3, 5)
            ],
        ]:
            register_metric(MetricSpec(
                name + suffix, "flow", _masked(partial(fn, count_holes=holes), "flow", mask),
                f"{what}, over {where}", unit))


_register_builtins()
