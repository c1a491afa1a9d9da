"""The weights bundled as the stereo and flow defaults have learned their task.

On held-out synthetic pairs (never trained on) each default model must be far better than the
best constant answer of those very pairs (the median ground-truth disparity; the median flow
vector); docs/training.md reports the full benchmark.
"""

from __future__ import annotations

import warnings

import numpy as np

import crossview
from crossview.data.synthetic.heldout import get_heldout
from crossview.models.defaults import DEFAULT_FLOW_MODEL, DEFAULT_STEREO_MODEL
from crossview.models.registry import get_spec

PAIRS = 4


def _errors(pred: np.ndarray, gt: np.ndarray, valid: np.ndarray) -> np.ndarray:
    """End-point errors of valid pixels; ``pred``, ``gt`` ``[C, H, W]``."""
    return np.linalg.norm((pred - gt)[:, valid], axis=0)


def test_default_stereo_model_beats_the_best_constant_disparity() -> None:
    data = get_heldout("synthetic-stereo", length=PAIRS)
    model_err, const_err = [], []
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # bundled weights: no random-weights warning
        model = crossview.load_model(DEFAULT_STEREO_MODEL)
    samples = [data[i] for i in range(PAIRS)]
    median = np.median(np.concatenate([s["disparity"][s["valid"]].numpy() for s in samples]))
    for s in samples:
        result = crossview.estimate_disparity(s["image0"][None], s["image1"][None], model=model)
        gt, valid = s["disparity"].numpy()[None], s["valid"].numpy()
        model_err.append(_errors(result.disparity.numpy(), gt, valid))
        const_err.append(_errors(np.full_like(gt, median), gt, valid))
    epe, const = np.concatenate(model_err).mean(), np.concatenate(const_err).mean()
    assert epe < 0.5 * const, (epe, const)


def test_default_flow_model_beats_the_best_constant_flow() -> None:
    data = get_heldout("synthetic-flow", length=PAIRS)
    model_err, const_err = [], []
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        model = crossview.load_model(DEFAULT_FLOW_MODEL)
    samples = [data[i] for i in range(PAIRS)]
    median = np.median(np.concatenate([s["flow"][:, s["valid"]].numpy() for s in samples], 1), 1)
    for s in samples:
        result = crossview.estimate_flow(s["image0"][None], s["image1"][None], model=model)
        gt, valid = s["flow"].numpy(), s["valid"].numpy()
        model_err.append(_errors(result.flow[0].numpy(), gt, valid))
        const_err.append(_errors(np.broadcast_to(median[:, None, None], gt.shape), gt, valid))
    epe, const = np.concatenate(model_err).mean(), np.concatenate(const_err).mean()
    assert epe < 0.5 * const, (epe, const)


def test_defaults_are_bundled() -> None:
    for name in (DEFAULT_STEREO_MODEL, DEFAULT_FLOW_MODEL):
        spec = get_spec(name)
        assert spec.weights_path is not None and spec.weights_path.is_file(), name
