"""The MatchStereo / MatchFlow models by name.

Built in: ``matchstereo-t``, ``matchstereo-s``, ``matchstereo-b`` (stereo) and ``matchflow-b``
(optical flow), the published architectures; their published weights are not shipped (pass
them with ``weights=``). Bundled models are data only: a ``NAME.safetensors`` and a ``NAME.json``
next to it in ``crossview/models/weights/`` (shipped as package data). The JSON holds
``{"name": ..., "task": "stereo" | "flow", "config": {MatchStereoConfig fields},
"description": ...}`` and optionally ``"weights"`` (a file name in that folder; default
``NAME.safetensors``); ``crossview train`` writes both files.
"""

from __future__ import annotations

import json
from functools import partial
from pathlib import Path

from crossview.models.matchstereo.config import VARIANTS, MatchStereoConfig
from crossview.models.matchstereo.inference import dense_predictor
from crossview.models.matchstereo.model import MatchStereo
from crossview.models.registry import WEIGHTS_DIR, ModelSpec, configured, register_model


def matchstereo_spec(name: str, config: MatchStereoConfig, task: str, *,
                     weights: str | None = None, description: str = "") -> ModelSpec:
    """The spec of a MatchStereo (``task="stereo"``) or MatchFlow (``"flow"``) network of
    ``config``; overrides replace config fields."""
    return ModelSpec(name, configured(config, partial(MatchStereo, task=task)), task,
                     weights=weights, description=description,
                     predictor=partial(dense_predictor, task=task))


def register_bundled(folder: Path = WEIGHTS_DIR) -> None:
    """Register every ``*.json`` description of bundled MatchStereo weights in ``folder``."""
    for description in sorted(folder.glob("*.json")):
        try:
            meta = json.loads(description.read_text())
            config = MatchStereoConfig(**{k: tuple(v) if isinstance(v, list) else v
                                          for k, v in meta.get("config", {}).items()})
            spec = matchstereo_spec(
                meta["name"], config, meta["task"],
                weights=str(folder / meta.get("weights", f"{description.stem}.safetensors")),
                description=meta.get("description", ""))
        except (ValueError, KeyError, TypeError) as error:
            raise ValueError(f"{description}: bad bundled model description ({error!r})") from None
        register_model(spec, replace=True)


for _letter, _variant in (("t", "tiny"), ("s", "small"), ("b", "base")):
    register_model(matchstereo_spec(
        f"matchstereo-{_letter}", VARIANTS[_variant], "stereo",
        description=f"MatchStereo-{_letter.upper()} (published architecture, "
                    f"matchstereo_{_variant}_fsd.pth)"))
register_model(matchstereo_spec(
    "matchflow-b", VARIANTS["base"], "flow",
    description="MatchFlow-B (published architecture, matchflow_base_sintel.pth)"))
register_bundled()
