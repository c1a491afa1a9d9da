"""A MatchStereo / MatchFlow bundle: ``NAME.safetensors`` and its registry description
``NAME.json``, written together (``crossview train --export``) and registered as model ``NAME``
when dropped into ``crossview/models/weights/`` (:func:`~.specs.register_bundled`).

The JSON holds ``{"name": ..., "task": "stereo" | "flow", "config": {MatchStereoConfig
fields}, "weights": "NAME.safetensors", "description": ...}`` and optionally ``"refine": true``
, ``"lri": true``, (stereo) ``"fuse": true`` and ``"fused_network"`` (the inference defaults).
"""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

from crossview.models import weights
from crossview.models.matchstereo.model import MatchStereo
from crossview.models.registry import ModelSpec
from crossview.output import check_output_files, staged_files


def write_bundle(model: MatchStereo, path: str | Path, *, name: str, task: str,
                 description: str = "", like: ModelSpec | None = None) -> tuple[Path, Path]:
    """Write ``model``'s weights as ``path`` (.safetensors) and its description
    ``path.with_suffix('.json')`` (name, task, configuration, and the inference defaults of
    ``like``, the model it was trained from: a fine-tuned model runs as its base does), both
    together or neither (:func:`crossview.output.staged_files`). The .safetensors metadata
    records the task (so a loader can refuse stereo weights for a flow model and vice versa,
    see :mod:`crossview.models.weights`), the name and the configuration (JSON)."""
    path = Path(path)
    meta_path = path.with_suffix(".json")
    check_output_files([path, meta_path])
    config = {k: list(v) if isinstance(v, tuple) else v
              for k, v in dataclasses.asdict(model.config).items()}
    meta = {"name": name, "task": task, "config": config, "weights": path.name,
            "description": description}
    if like is not None:
        meta.update({key: True for key in ("refine", "lri", "fuse") if getattr(like, key)})
        if like.fused_network is not None:
            meta["fused_network"] = dataclasses.asdict(like.fused_network)
    with staged_files([path, meta_path]) as (weights_file, meta_file):
        weights.write_safetensors(weights_file, model.state_dict(), task,
                          {"name": name, "config": json.dumps(config)})
        meta_file.write_text(json.dumps(meta, indent=2) + "\n")
    return path, meta_path
