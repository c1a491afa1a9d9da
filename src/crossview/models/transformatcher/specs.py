"""TransforMatcher by name: ``transformatcher``, with the bundled weights trained on synthetic
warps (EfficientNet-Lite0 backbone); overrides are the constructor's options."""

from __future__ import annotations

from crossview.models.registry import ModelSpec, register_model
from crossview.models.transformatcher.inference import (
    VARIANTS,
    WEIGHTS,
    keypoint_predictor,
    load_transformatcher,
)
from crossview.models.transformatcher.model import TASK, TransforMatcher

register_model(ModelSpec(
    "transformatcher", TransforMatcher, TASK, weights=str(WEIGHTS),
    description="TransforMatcher, EfficientNet-Lite0 features (semantic keypoint transfer)",
    predictor=keypoint_predictor, variants=VARIANTS, load=load_transformatcher))
