"""A continuous per-pixel confidence in [0, 1] from two-view consistency and attention.

Two cues, each in [0, 1]:

- *Consistency*: a match that the other view's field maps back onto itself is likely right;
  one that lands elsewhere is likely wrong (occluded, or a mistake in either view). With the
  left-right (stereo) or forward-backward (flow) consistency error ``e`` of
  :func:`crossview.geometry.consistency.consistency_error` (L1, px) it is ``exp(-e / scale)``:
  1 for a perfectly consistent match, 0.37 at ``e = scale``, close to 0 where the match leaves
  the other image (there ``e = |field|_1``).
- *Attention peak*: how sharply the last cross-attention layer's BilinearSoftmax weights
  ``[..., heads, K]`` (K = (2r+2)^2 keys around the match) concentrate on one key,
  ``(max_k w - 1/K) / (1 - 1/K)`` averaged over heads (1: one key takes all the weight, 0:
  uniform weights).

The confidence is ``consistency * (1 - peak)``. The sign of the attention cue is measured, not
assumed: in the bundled models a *sharp* last-layer peak marks errors (ranked alone, it is
worse than a random ranking on every development and held-out scene), while a spread one
marks pixels whose whole window already agrees with the match; multiplied in, ``1 - peak``
lowers the sparsification AUC of the consistency cue alone on every stereo scene measured
and leaves flow about unchanged
(``docs/results/confidence/confidence_auc.py``, :mod:`crossview.metrics.sparsification`).
"""

from __future__ import annotations

import torch

from crossview.geometry.consistency import consistency_error

CONFIDENCE_SCALE = 1.0  # px of consistency error at which the confidence is 1/e


def consistency_confidence(error: torch.Tensor, scale: float = CONFIDENCE_SCALE) -> torch.Tensor:
    """``exp(-error / scale)`` ``[...]`` of consistency errors ``[...]`` (px, >= 0).

    >>> consistency_confidence(torch.tensor([0.0, 1.0]))
    tensor([1.0000, 0.3679])
    """
    if scale <= 0:
        raise ValueError(f"scale must be positive, got {scale=}")
    return torch.exp(-error.clamp_min(0) / scale)


def attention_peak(attn: torch.Tensor) -> torch.Tensor:
    """Peak sharpness ``[...]`` in [0, 1] of attention weights ``[..., heads, K]`` (each row
    summing to 1): ``(max_k w - 1/K) / (1 - 1/K)``, averaged over heads.

    >>> attention_peak(torch.tensor([[[1.0, 0.0, 0.0, 0.0], [0.25, 0.25, 0.25, 0.25]]]))
    tensor([0.5000])
    """
    if attn.ndim < 2 or attn.shape[-1] < 2:
        raise ValueError(f"attn must be [..., heads, K] with K >= 2, got {attn.shape=}")
    keys = attn.shape[-1]
    peak = (attn.amax(-1) - 1.0 / keys) / (1.0 - 1.0 / keys)
    return peak.mean(-1).clamp(0.0, 1.0)


def field_confidence(field: torch.Tensor, peak: torch.Tensor | None = None,
                     scale: float = CONFIDENCE_SCALE, *,
                     error: torch.Tensor | None = None) -> torch.Tensor:
    """Confidence ``[2B, H, W]`` of both views' fields ``[2B, H, W, 2]`` (stacked as in
    :mod:`crossview.geometry.consistency`): the consistency cue times ``1 - peak``, the
    attention peak ``[2B, H, W]`` (:func:`attention_peak` at the fields' resolution), or the
    consistency cue alone without ``peak``. ``error``: the fields' consistency error
    ``[2B, H, W]`` if computed already (:func:`consistency_error`)."""
    if error is None:
        error = consistency_error(field)[0]
    confidence = consistency_confidence(error, scale)
    return confidence if peak is None else confidence * (1.0 - peak)
