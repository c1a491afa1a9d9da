"""Classical baselines scored beside a model on real scenes: OpenCV SGBM (stereo), DIS (flow).

- stereo: ``cv2.StereoSGBM`` with the parameters of :mod:`crossview.models.dense.classical`
  and ``numDisparities = ceil(1.1 * max known disparity / 16) * 16``: a range read off the
  ground truth (an oracle, which favours SGBM). Pixels SGBM leaves without a disparity are
  holes.
- flow: ``cv2.DISOpticalFlow`` with ``DISOPTICAL_FLOW_PRESET_MEDIUM`` on the grey frames
  (``cv2.cvtColor(..., COLOR_RGB2GRAY)``).
- semantic: the identity, the source keypoints copied into the target (same pixel
  coordinates): what a method must beat to have matched anything. The model's own
  no-refinement variant (raw correlation) is scored beside it by ``crossview eval``
  (:attr:`crossview.models.registry.ModelSpec.variants`).

A scene folder's cached output (``sgbm.npy`` / ``dis_medium.npy``, read into
``sample["baseline"]`` by :class:`~crossview.data.datasets.scenes.SceneFolders`) is used as it
is; other scenes are computed with OpenCV (``opencv-python-headless``, a dependency of
crossview). Without OpenCV (a broken install) a scene without a cached output has no baseline,
which :class:`BaselineRun` records instead of failing.
Holes count as errors in the scenes' metrics (``*_holes``, see :mod:`crossview.metrics.score`).
Stereo has a second row, **SGBM filled**: the same output with its holes filled as
Middlebury's evaluation fills sparse results (:func:`fill_holes`), what a user of OpenCV gets
after one line of post-processing, and the classical answer to beat.

On the real-dev scenes (``/work/shared/real-dev``), OpenCV 5.0 reproduces the cached SGBM files
(made with OpenCV 4.12) bit for bit. Its DIS flow scores 0.005 px EPE and 0.19 points of Fl
worse than the cached file: that file was computed on frames made grey by ``cv2.imread`` (the
PNG decoder's conversion, up to one grey level off ``cvtColor``'s), and DIS is that sensitive
(4.12 on ``imread`` grey frames reproduces the file exactly). ``tests/test_baselines.py``
holds both to stated tolerances.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from torch.utils.data import Subset

from crossview.data.datasets.scenes import SceneFolders
from crossview.distributed import DistInfo
from crossview.eval import EvalResult, SampleCallback, evaluate
from crossview.metrics.score import MetricSpec, Reduction
from crossview.models.dense.classical import (
    cv2,
    dis_flow,
    fill_holes,
    opencv_version,
    sgbm_disparity,
    sgbm_num_disparities,
)

INSTALL_HINT = "pip install opencv-python-headless"


def _sgbm(sample: Mapping[str, Any]) -> np.ndarray:
    top = float(sample["disparity"][sample["valid"]].max())
    return sgbm_disparity(sample["image0"], sample["image1"], sgbm_num_disparities(top))


def _dis(sample: Mapping[str, Any]) -> np.ndarray:
    return dis_flow(sample["image0"], sample["image1"])


def _identity(sample: Mapping[str, Any]) -> np.ndarray:
    return np.asarray(sample["keypoints0"], np.float32)


@dataclass(frozen=True)
class Baseline:
    """A task's baseline: its name, what it is (a caption for tables), ``compute(sample)`` and
    ``finish`` (applied to the raw output, computed or cached; None: used as it is);
    ``opencv=False``: computed on every sample of any dataset, without OpenCV or a cache."""

    name: str
    caption: str
    compute: Callable[[Mapping[str, Any]], np.ndarray]
    finish: Callable[[np.ndarray], np.ndarray] | None = None
    opencv: bool = True  # computed with OpenCV, or read from a scene folder's cache


_SGBM_CAPTION = ("SGBM: OpenCV StereoSGBM 3-way, block 5, P1 8*3*25, P2 32*3*25, uniqueness 10, "
                 "speckle 100/2; numDisparities = ceil(1.1 * max GT / 16) * 16 is an oracle "
                 "range read off the ground truth, which favours SGBM")
# task -> its baselines, the first one the reference (the one without post-processing)
BASELINES = {
    "stereo": (
        Baseline("SGBM", _SGBM_CAPTION, _sgbm),
        Baseline("SGBM filled", "SGBM filled: its holes filled as Middlebury's evaluation "
                 "fills sparse results (along the row, the farther of the nearest valid "
                 "neighbours)", _sgbm, fill_holes),
    ),
    "flow": (Baseline("DIS", "DIS: OpenCV DIS optical flow, medium preset, on the grey frames",
                      _dis),),
    "semantic": (Baseline("identity", "identity: the source keypoints copied into the target "
                          "at the same pixel coordinates", _identity, opencv=False),),
}


@dataclass
class BaselineRun:
    """A baseline scored on the scenes that have it: ``result`` (None when none has),
    ``sources`` (scene -> "cached FILE" or "OpenCV VERSION") and ``missing`` (scenes without
    a cached output while OpenCV is not installed)."""

    baseline: Baseline
    result: EvalResult | None
    sources: dict[str, str] = field(default_factory=dict)
    missing: list[str] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready dict."""
        return {"name": self.baseline.name, "caption": self.baseline.caption,
                "opencv": opencv_version(), "sources": self.sources, "missing": self.missing,
                "not_available": f"not available ({INSTALL_HINT})" if self.missing else None,
                **({} if self.result is None else self.result.to_dict())}


def evaluate_baseline(dataset: SceneFolders | Sequence[Mapping[str, Any]],
                      metrics: list[MetricSpec], *, baseline: Baseline | None = None,
                      reduction: Reduction = "image_mean", limit: int | None = None,
                      on_sample: SampleCallback | None = None,
                      dist_info: DistInfo | None = None) -> BaselineRun:
    """Score ``baseline`` (default: the first of ``dataset.task``'s) on (the first ``limit``)
    samples of ``dataset`` with ``metrics``. An OpenCV baseline runs on scene folders: the
    cached output where a scene has one, else OpenCV's, else (no OpenCV) the scene is listed
    in ``missing``; any other is computed on every sample. Arguments as
    :func:`crossview.eval.evaluate`."""
    baseline = baseline or BASELINES[dataset.task][0]
    if not baseline.opencv:
        return BaselineRun(baseline, evaluate(
            dataset, baseline.compute, metrics, reduction=reduction, dataset_name=baseline.name,
            limit=limit, on_sample=on_sample, dist_info=dist_info))
    count = len(dataset) if limit is None else min(limit, len(dataset))
    names = dataset.names()[:count]
    sources, missing, indices = {}, [], []
    for index, name in enumerate(names):
        cached = dataset.cached_baseline(index)
        if cached is None and cv2 is None:
            missing.append(name)
            continue
        indices.append(index)
        sources[name] = (f"cached {cached.name}" if cached is not None
                         else f"OpenCV {cv2.__version__}")

    def predict(sample: Mapping[str, Any]) -> np.ndarray:
        raw = sample["baseline"] if "baseline" in sample else baseline.compute(sample)
        return raw if baseline.finish is None else baseline.finish(raw)

    result = None
    if indices:
        result = evaluate(Subset(dataset, indices), predict, metrics, reduction=reduction,
                          dataset_name=baseline.name, on_sample=on_sample,
                          dist_info=dist_info)
    return BaselineRun(baseline, result, sources, missing)
