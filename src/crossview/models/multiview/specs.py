"""The multi-view transformers by name: ``multiview`` (novel-view synthesis, the camera-encoding
study's model) and ``multiview-depth`` (depth of every view, the depth study's model);
overrides are :class:`MultiViewConfig` fields (``conditioning="gta"``, ...). No weights are
shipped: the studies train them from scratch."""

from __future__ import annotations

from crossview.models.multiview.depth import MultiViewDepth
from crossview.models.multiview.model import MultiViewConfig, MultiViewTransformer
from crossview.models.registry import ModelSpec, configured, register_model

register_model(ModelSpec(
    "multiview", configured(MultiViewConfig(), MultiViewTransformer), "novel-view",
    description="LVSM-style multi-view transformer with a choice of camera conditioning"))
register_model(ModelSpec(
    "multiview-depth", configured(MultiViewConfig(), MultiViewDepth), "multiview-depth",
    description="multi-view depth transformer with a choice of camera conditioning"))
