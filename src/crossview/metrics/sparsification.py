"""Sparsification curves and their area (AUC): how well a confidence ranks a prediction's errors.

Remove the least confident fraction ``p`` of the evaluated pixels and measure the error of the
rest; the sparsification curve is that error as a function of ``p``, sampled at
``p = k / steps``, ``k = 0 .. steps - 1`` (the last sample keeps ``1 / steps`` of the pixels).
Its AUC is the left Riemann sum ``mean_k error(k / steps)`` of ``integral_0^1 error(p) dp``
(the confidence-estimation literature's measure, e.g. Hu & Mordohai, TPAMI 2012; Poggi et
al., "On the confidence of stereo matching in a deep-learning era", TPAMI 2021, both on 5 %
steps: ``steps = 20``). Lower is better; two references bound it:

- the *oracle* ranks pixels by their true error (the best any confidence can do);
- a *random* ranking keeps, in expectation, the mean error at every ``p``: its AUC is the
  error's mean.

``errors`` are per-pixel errors ``[N]`` (absolute disparity error for EPE, or 0/1 for a bad-N
rate: pass ``100 * (error > N)`` for percentages). Pixels of equal confidence keep their given
order (a stable sort), and so do pixels of equal error in the oracle.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

SPARSIFICATION_STEPS = 20  # 5 % steps, as the literature reports


@dataclass(frozen=True)
class Sparsification:
    """The curve ``[steps]`` of a confidence and of the oracle, and the three AUCs."""

    curve: np.ndarray
    oracle_curve: np.ndarray
    auc: float
    auc_oracle: float
    auc_random: float


def sparsification_curve(errors: np.ndarray, confidence: np.ndarray,
                         steps: int = SPARSIFICATION_STEPS) -> np.ndarray:
    """Mean error ``[steps]`` of the ``round(N (1 - k / steps))`` most confident of the ``N``
    pixels (``errors``, ``confidence``: ``[N]``), ``k = 0 .. steps - 1``.

    >>> sparsification_curve(np.array([4.0, 0.0, 2.0, 0.0]), np.array([0.1, 0.9, 0.5, 0.8]), 4)
    array([1.5       , 0.66666667, 0.        , 0.        ])
    """
    errors = np.asarray(errors, np.float64).ravel()
    confidence = np.asarray(confidence, np.float64).ravel()
    if errors.shape != confidence.shape:
        raise ValueError(f"errors and confidence must be alike: {errors.shape=}, "
                         f"{confidence.shape=}")
    if errors.size == 0:
        raise ValueError("no pixels to evaluate (errors is empty)")
    if steps < 1:
        raise ValueError(f"steps must be at least 1, got {steps=}")
    if not (np.isfinite(errors).all() and np.isfinite(confidence).all()):
        raise ValueError("errors and confidence must be finite")
    ranked = errors[np.argsort(-confidence, kind="stable")]
    running_mean = np.cumsum(ranked) / np.arange(1, ranked.size + 1)
    kept = np.maximum(np.round(ranked.size * (1 - np.arange(steps) / steps)).astype(int), 1)
    return running_mean[kept - 1]


def sparsification(errors: np.ndarray, confidence: np.ndarray,
                   steps: int = SPARSIFICATION_STEPS) -> Sparsification:
    """The curves of ``confidence`` and of the oracle over ``errors`` (both ``[N]``) and their
    AUCs, with the random ranking's AUC (the mean error).

    >>> s = sparsification(np.array([4.0, 0.0, 2.0, 0.0]), np.array([0.9, 0.1, 0.5, 0.8]), 4)
    >>> round(s.auc, 3), round(s.auc_oracle, 3), s.auc_random
    (2.375, 0.542, 1.5)
    """
    errors = np.asarray(errors, np.float64).ravel()
    curve = sparsification_curve(errors, confidence, steps)
    oracle = sparsification_curve(errors, -errors, steps)
    return Sparsification(curve, oracle, float(curve.mean()), float(oracle.mean()),
                          float(errors.mean()))
