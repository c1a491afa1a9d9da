"""A trained TransforMatcher as a weights file (``crossview train --export``): the tensors
training changed, with metadata naming the task (checked by
:func:`~.inference.load_transformatcher`) and the backbone."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

from crossview.models.transformatcher.model import TASK, TransforMatcher
from crossview.models.weights import write_safetensors


def export_transformatcher(model: TransforMatcher, path: str | Path,
                           metadata: Mapping[str, str]) -> Path:
    """Write the trained tensors (:meth:`TransforMatcher.trained_state_dict`: the refinement,
    plus the backbone's feature layers if tuned) to a ``.safetensors`` file, atomically. The
    metadata gets ``task`` (``"semantic"``, see :mod:`crossview.models.weights`), ``backbone``
    (its name) and ``backbone_tuned`` (``"True"`` when the file holds the backbone) on top of
    ``metadata``."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    return write_safetensors(path, model.trained_state_dict(), TASK,
                             {**metadata, "backbone": model.backbone_name,
                              "backbone_tuned": str(model.backbone_tuned)})
