"""The multi-view transformer by name: ``multiview`` (novel-view synthesis, the camera-encoding
study's model); overrides are :class:`MultiViewConfig` fields (``conditioning="gta"``, ...).
No weights are shipped: the study trains it from scratch."""

from __future__ import annotations

from crossview.models.multiview.model import MultiViewConfig, MultiViewTransformer
from crossview.models.registry import ModelSpec, configured, register_model

register_model(ModelSpec(
    "multiview", configured(MultiViewConfig(), MultiViewTransformer), "novel-view",
    description="LVSM-style multi-view transformer with a choice of camera conditioning"))
