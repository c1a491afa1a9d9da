from __future__ import annotations

import math

import numpy as np
import pytest

from crossview.metrics.depth import abs_rel, delta1


def sample() -> dict[str, np.ndarray]:
    depth = np.array([[[2.0, 4.0], [1.0, 5.0]], [[9.0, 9.0], [9.0, 9.0]]])
    valid = np.array([[[True, True], [True, False]], [[True] * 2] * 2])
    return {"depth": depth, "valid": valid}


def test_hand_computed_values_on_the_reference_view() -> None:
    prediction = np.array([[2.2, 3.0], [1.3, 100.0]])  # the invalid pixel is ignored
    # |0.2|/2 + |1|/4 + |0.3|/1 = 0.1 + 0.25 + 0.3 over 3 valid pixels of view 0
    score = abs_rel(prediction, sample())
    assert score.count == 3 and score.value == pytest.approx(0.65 / 3)
    # ratios 1.1, 4/3, 1.3: only the first is below 1.25
    ratio = delta1(prediction, sample())
    assert ratio.count == 3 and ratio.value == pytest.approx(100 / 3)


def test_a_nan_prediction_is_never_accurate() -> None:
    prediction = np.array([[math.nan, 4.0], [1.0, 5.0]])
    assert math.isnan(delta1(prediction, sample()).value)
    assert math.isnan(abs_rel(prediction, sample()).value)


@pytest.mark.parametrize("shape", [(2,), (2, 3), (2, 2, 2)])
def test_prediction_must_be_the_reference_view(shape: tuple[int, ...]) -> None:
    with pytest.raises(ValueError, match="reference view's depth"):
        abs_rel(np.ones(shape), sample())
