"""A continuous per-pixel confidence in [0, 1] from two-view consistency.

A match that the other view's field maps back onto itself is likely right; one that lands
elsewhere is likely wrong (occluded, or a mistake in either view). With the left-right
(stereo) or forward-backward (flow) consistency error ``e`` of
:func:`crossview.geometry.consistency.consistency_error` (L1, px), the confidence is
``exp(-e / scale)``: 1 for a perfectly consistent match, 0.37 at ``e = scale``, and close to 0
where the match leaves the other image (there ``e = |field|_1``). It only ranks pixels
through ``e``, so the sparsification curve (:mod:`crossview.metrics.confidence`) does not
depend on ``scale``; ``scale`` only sets how the picture looks and what a threshold on it
means.
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


def field_confidence(field: torch.Tensor, scale: float = CONFIDENCE_SCALE) -> torch.Tensor:
    """Confidence ``[2B, H, W]`` of both views' fields ``[2B, H, W, 2]`` (stacked as in
    :mod:`crossview.geometry.consistency`)."""
    return consistency_confidence(consistency_error(field)[0], scale)
