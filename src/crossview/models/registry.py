"""Named models: what to build, for which task, and which weights come with the package.

Built in: ``matchstereo-t``, ``matchstereo-s``, ``matchstereo-b`` (stereo) and ``matchflow-b``
(optical flow), the published architectures; their published weights are not shipped (pass
them with ``weights=``). Others can be added two ways:

- in code: ``register_model(ModelSpec("my-stereo", build=lambda: MatchStereo(cfg),
  task="stereo", weights="my_stereo.safetensors"))``;
- with data only: put ``NAME.safetensors`` and a ``NAME.json`` next to it in
  ``crossview/models/weights/`` (shipped as package data). The JSON holds ``{"name": ...,
  "task": "stereo" | "flow", "config": {MatchStereoConfig fields}, "description": ...}`` and
  optionally ``"weights"`` (a file name in that folder; default ``NAME.safetensors``).

A spec's ``weights`` is a file name inside that folder or an absolute path; it is what
:func:`crossview.load_model` loads when the caller gives no weights.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from torch import nn

from crossview.errors import UserError
from crossview.models.matchstereo.config import VARIANTS, MatchStereoConfig
from crossview.models.matchstereo.model import MatchStereo

WEIGHTS_DIR = Path(__file__).resolve().parent / "weights"


@dataclass(frozen=True)
class ModelSpec:
    """A registered model: ``build()`` returns a fresh, randomly initialised network."""

    name: str
    build: Callable[[], nn.Module]
    task: str
    weights: str | None = None
    description: str = ""

    @property
    def weights_path(self) -> Path | None:
        """The default weights file, or ``None`` when the package ships none for this model."""
        if self.weights is None:
            return None
        path = Path(self.weights)
        return path if path.is_absolute() else WEIGHTS_DIR / path


_REGISTRY: dict[str, ModelSpec] = {}


def register_model(spec: ModelSpec, *, replace: bool = False) -> ModelSpec:
    """Add ``spec`` under ``spec.name`` (lower case); ``replace=True`` to overwrite a name."""
    name = spec.name.lower()
    if name in _REGISTRY and not replace:
        raise ValueError(f"model {name!r} is already registered")
    _REGISTRY[name] = spec
    return spec


def get_spec(name: str) -> ModelSpec:
    """The spec registered under ``name``; :class:`UserError` listing the names otherwise
    (``TypeError`` if ``name`` is not a string)."""
    if not isinstance(name, str):
        raise TypeError(f"the model name must be a string, got {name!r}; choose one of: "
                        f"{', '.join(list_models())}")
    try:
        return _REGISTRY[name.lower()]
    except KeyError:
        raise UserError(f"unknown model {name!r}; choose one of: "
                        f"{', '.join(list_models())}") from None


def list_models() -> list[str]:
    """Registered model names, sorted."""
    return sorted(_REGISTRY)


def _matchstereo(config: MatchStereoConfig, task: str) -> Callable[[], nn.Module]:
    return lambda: MatchStereo(config, task=task)


def _register_builtin() -> None:
    for letter, variant in (("t", "tiny"), ("s", "small"), ("b", "base")):
        register_model(ModelSpec(
            f"matchstereo-{letter}", _matchstereo(VARIANTS[variant], "stereo"), "stereo",
            description=f"MatchStereo-{letter.upper()} (published architecture, "
                        f"matchstereo_{variant}_fsd.pth)"))
    register_model(ModelSpec(
        "matchflow-b", _matchstereo(VARIANTS["base"], "flow"), "flow",
        description="MatchFlow-B (published architecture, matchflow_base_sintel.pth)"))


def _register_bundled(folder: Path = WEIGHTS_DIR) -> None:
    """Register every ``*.json`` description of bundled MatchStereo weights in ``folder``."""
    for description in sorted(folder.glob("*.json")):
        try:
            meta = json.loads(description.read_text())
            config = MatchStereoConfig(**{k: tuple(v) if isinstance(v, list) else v
                                          for k, v in meta.get("config", {}).items()})
            spec = ModelSpec(meta["name"], _matchstereo(config, meta["task"]), meta["task"],
                             weights=str(folder / meta.get("weights",
                                                           f"{description.stem}.safetensors")),
                             description=meta.get("description", ""))
        except (ValueError, KeyError, TypeError) as error:
            raise ValueError(f"{description}: bad bundled model description ({error!r})") from None
        register_model(spec, replace=True)


_register_builtin()
_register_bundled()
