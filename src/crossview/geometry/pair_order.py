"""Which image of a stereo pair is the left one, told by its matches.

A rectified pair seen by parallel cameras holds every point at a positive disparity
``d = x_left - x_right`` (0 at infinity). Given the other way round, right image first, every
match holds a negative one, and a model trained on rectified pairs answers nonsense without
saying so. :func:`warn_if_swapped` logs one warning when nearly all matches say the order is
reversed; a few negative disparities (mismatches, a rig's ``doffs``) say nothing.

Example:
    >>> import numpy as np
    >>> reversed_share(np.array([-12.0, -30.0, -5.0, 4.0]), tolerance=0.5)
    0.75
"""

from __future__ import annotations

import logging

import numpy as np

log = logging.getLogger(__name__)

# the share of matches at negative disparities from which a pair is said to be swapped
SWAPPED_SHARE = 0.9
MIN_MATCHES = 20  # fewer matches than this tell nothing about the order


def reversed_share(disparities: np.ndarray, tolerance: float) -> float:
    """The share of ``disparities [N]`` (px, ``x_left - x_right`` of matches) below
    ``-tolerance``; 0.0 for no matches."""
    disparities = np.asarray(disparities, dtype=np.float64).ravel()
    if disparities.size == 0:
        return 0.0
    return float(np.mean(disparities < -tolerance))


def warn_if_swapped(disparities: np.ndarray, tolerance: float) -> bool:
    """Log a warning (and return ``True``) when at least :data:`SWAPPED_SHARE` of at least
    :data:`MIN_MATCHES` ``disparities [N]`` (px, ``x_left - x_right``) lie below
    ``-tolerance``: the images were most likely given right first."""
    disparities = np.asarray(disparities).ravel()
    share = reversed_share(disparities, tolerance)
    if disparities.size < MIN_MATCHES or share < SWAPPED_SHARE:
        return False
    log.warning("%.0f %% of the matches lie at negative disparities (the point further left in "
                "the second image than in the first): the left and right images look swapped; "
                "give the left image first", 100 * share)
    return True
