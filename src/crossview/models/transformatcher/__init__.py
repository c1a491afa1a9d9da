"""TransforMatcher: match-to-match attention for semantic correspondence.

Files: ``backbone`` (ImageNet CNNs with many feature layers), ``correlation`` (Eq. 4 and 4D
upsampling), ``layers`` (match-to-match attention, Eq. 5-7), ``softargmax`` (Eq. 10-11),
``loss`` (Eq. 12 and its dense form), ``model`` (it keeps the keypoint-matching contract,
:mod:`crossview.models.keypoints`, which runs one pair of any sizes), ``inference`` (loading,
benchmark predictor), ``bundle`` (a trained model as a weights file), ``specs`` (its
registration); the match pictures are in :mod:`crossview.viz`.
"""

from __future__ import annotations

from crossview.models.transformatcher.inference import keypoint_predictor, load_transformatcher
from crossview.models.transformatcher.model import TransforMatcher

__all__ = ["TransforMatcher", "keypoint_predictor", "load_transformatcher"]
