"""The weights bundled as the stereo and flow defaults have learned their task.

On held-out synthetic pairs (never trained on) each default model must have less than half the
end-point error of the best constant answer for those very pairs (the median ground-truth
disparity; the median flow vector); docs/training.md reports the full benchmark.
"""

from __future__ import annotations

import warnings

import numpy as np
import pytest

import crossview
from crossview.data.synthetic.heldout import get_heldout
from crossview.defaults import DEFAULT_FLOW_MODEL, DEFAULT_STEREO_MODEL
from crossview.models.registry import get_spec

PAIRS = 4


def _stereo(model, sample) -> tuple[np.ndarray, np.ndarray]:
    """Prediction and ground truth ``[1, H, W]`` (disparity)."""
    result = crossview.estimate_disparity(sample["image0"][None], sample["image1"][None],
                                          model=model)
    return result.disparity.numpy(), sample["disparity"].numpy()[None]


def _flow(model, sample) -> tuple[np.ndarray, np.ndarray]:
    """Prediction and ground truth ``[2, H, W]`` (flow x, y)."""
    result = crossview.estimate_flow(sample["image0"][None], sample["image1"][None], model=model)
    return result.flow[0].numpy(), sample["flow"].numpy()


@pytest.mark.parametrize(("name", "dataset", "predict"), [
    (DEFAULT_STEREO_MODEL, "synthetic-stereo", _stereo),
    (DEFAULT_FLOW_MODEL, "synthetic-flow", _flow),
])
def test_default_model_beats_the_best_constant(name, dataset, predict) -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # bundled weights: no random-weights warning
        model = crossview.load_model(name)
    data = get_heldout(dataset, length=PAIRS)
    pairs = [(predict(model, s), s["valid"].numpy()) for s in (data[i] for i in range(PAIRS))]
    median = np.median(np.concatenate([gt[:, valid] for (_, gt), valid in pairs], axis=1), axis=1)
    model_err, const_err = [], []
    for (pred, gt), valid in pairs:
        model_err.append(np.linalg.norm((pred - gt)[:, valid], axis=0))
        const_err.append(np.linalg.norm((median[:, None] - gt[:, valid]), axis=0))
    epe, const = np.concatenate(model_err).mean(), np.concatenate(const_err).mean()
    assert epe < 0.5 * const, (epe, const)


def test_defaults_are_bundled() -> None:
    for name in (DEFAULT_STEREO_MODEL, DEFAULT_FLOW_MODEL):
        spec = get_spec(name)
        assert spec.weights_path is not None and spec.weights_path.is_file(), name
