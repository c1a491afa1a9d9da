"""``crossview.metrics.sparsification``: curves by hand, the oracle's bounds, the random
ranking's expectation, and the literature's closed form for a bad-pixel rate."""

from __future__ import annotations

import numpy as np
import pytest

from crossview.metrics.sparsification import sparsification, sparsification_curve


def test_curve_by_hand() -> None:
    # confidence ranks the errors 4, 0, 2, 0: keep 4, 3, 2, 1 pixels -> 6/4, 6/3, 4/2, 4/1
    curve = sparsification_curve(np.array([2.0, 0.0, 4.0, 0.0]),
                                 np.array([0.5, 0.1, 0.9, 0.8]), steps=4)
    np.testing.assert_allclose(curve, [1.5, 2.0, 2.0, 4.0])


def test_oracle_bounds_every_confidence_and_a_perfect_confidence_reaches_it() -> None:
    rng = np.random.default_rng(0)
    errors = rng.exponential(size=1000)
    perfect = sparsification(errors, -errors)
    assert perfect.auc == pytest.approx(perfect.auc_oracle)
    np.testing.assert_allclose(perfect.curve, perfect.oracle_curve)
    for _ in range(5):
        s = sparsification(errors, rng.normal(size=1000))
        assert s.auc_oracle <= s.auc
        assert (s.oracle_curve <= s.curve + 1e-12).all()
    worst = sparsification(errors, errors)  # confident exactly where wrong
    assert worst.auc > worst.auc_random > worst.auc_oracle


def test_random_confidence_averages_to_the_mean_error() -> None:
    rng = np.random.default_rng(1)
    errors = rng.exponential(size=2000)
    aucs = [sparsification(errors, rng.random(2000)).auc for _ in range(200)]
    s = sparsification(errors, rng.random(2000))
    assert s.auc_random == pytest.approx(errors.mean())
    assert np.mean(aucs) == pytest.approx(s.auc_random, rel=0.02)


def test_oracle_of_a_bad_pixel_rate_follows_the_closed_form() -> None:
    # for a 0/1 error of rate e the oracle curve is max(0, e - p) / (1 - p), whose integral
    # is e + (1 - e) ln(1 - e) (Hu & Mordohai 2012); 1000 steps approach it
    rate, n = 0.3, 100_000
    errors = (np.arange(n) < rate * n).astype(float)
    s = sparsification(errors, np.zeros(n), steps=1000)
    assert s.auc_oracle == pytest.approx(rate + (1 - rate) * np.log(1 - rate), abs=1e-3)


def test_the_first_sample_is_the_mean_error_and_the_last_keeps_one_step() -> None:
    errors = np.arange(40, dtype=float)
    curve = sparsification_curve(errors, -errors, steps=20)
    assert curve[0] == errors.mean() and curve[-1] == pytest.approx(0.5)  # 2 of 40 kept


@pytest.mark.parametrize("errors,confidence,steps", [
    (np.zeros(3), np.zeros(4), 20),
    (np.zeros(0), np.zeros(0), 20),
    (np.zeros(3), np.zeros(3), 0),
    (np.array([np.nan, 1.0]), np.zeros(2), 20),
    (np.zeros(2), np.array([np.inf, 1.0]), 20),
])
def test_bad_arguments(errors: np.ndarray, confidence: np.ndarray, steps: int) -> None:
    with pytest.raises(ValueError):
        sparsification_curve(errors, confidence, steps)
