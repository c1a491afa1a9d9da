"""Speed presets of the fused defaults: ``fast``, ``balanced`` and ``best``, three points on the
measured curve of time per pair against accuracy (docs/results/speed-presets/README.md).

A preset is a setting of some of :class:`crossview.models.registry.FusedNetwork`'s fields: the
network's scale, its low-resolution initialisation and refinement, how many classical runs the
fusion makes, which colour-weighted median passes it keeps and, for ``fast``, the working size
(the whole run on the pair shrunk to at most ``max_pixels``, resized back). It is laid over the
model's own ``fused_network`` (its weights' description), so that what it does not set (the
working size of the others, the lining up of the rows) stays the model's; ``preset=None``
runs the model's own, which for the bundled defaults is one of the presets
(:data:`DEFAULT_PRESETS`). Only models that fuse with a classical matcher (``fused_network``
set) take a preset.

Example:
    >>> from crossview.models.registry import FusedNetwork
    >>> best = FusedNetwork(scale=0.75, max_pixels=700_000, align_px=0.0)
    >>> fast = apply_preset(best, "stereo", "fast")
    >>> fast.max_pixels < best.max_pixels, fast.scale < best.scale, fast.align_px
    (True, True, 0.0)
"""

from __future__ import annotations

import dataclasses
from typing import Any

from crossview.defaults import PRESET_NAMES
from crossview.errors import UserError
from crossview.models.registry import FusedNetwork

# each preset's FusedNetwork fields, per task; chosen per time budget by leave-one-group-out on
# the real-train scenes (docs/results/speed-presets/speed_choice.py); "best" is the most accurate
# setting measured, whatever its time
PRESETS: dict[str, dict[str, dict[str, Any]]] = {
    "stereo": {
        "fast": {"scale": 0.3, "lri": False, "refine": False, "classical_runs": 1,
                 "median_passes": (0, 1), "max_pixels": 120_000},
        "balanced": {"scale": 0.3, "lri": False, "refine": False, "classical_runs": 1,
                     "median_passes": (0, 1)},
        "best": {"scale": 0.75, "lri": False, "refine": False, "classical_runs": 2,
                 "median_passes": (0, 1)},
    },
    "flow": {
        "fast": {"scale": 0.5, "lri": False, "refine": False, "classical_runs": 1,
                 "median_passes": ()},
        "balanced": {"scale": 0.75, "lri": False, "refine": False, "classical_runs": 1,
                     "median_passes": ()},
        "best": {"scale": 1.0, "lri": True, "refine": True, "classical_runs": 3,
                 "median_passes": (0, 1)},
    },
}
# the preset each bundled default's own fused_network equals (checked by the tests)
DEFAULT_PRESETS = {"matchstereo-hybrid": "best", "matchflow-hybrid": "best"}


def check_preset(preset: str | None) -> None:
    """A :class:`UserError` unless ``preset`` is ``None`` or one of :data:`PRESET_NAMES`."""
    if preset is not None and preset not in PRESET_NAMES:
        raise UserError(f"unknown preset {preset!r}; choose one of {', '.join(PRESET_NAMES)}")


def apply_preset(settings: FusedNetwork, task: str, preset: str | None) -> FusedNetwork:
    """``settings`` with the fields of ``preset`` for ``task`` (``"stereo"`` or ``"flow"``);
    ``preset=None``: ``settings`` unchanged."""
    check_preset(preset)
    if preset is None:
        return settings
    if task not in PRESETS:
        raise UserError(f"presets are for stereo and flow models, not {task}")
    return dataclasses.replace(settings, **PRESETS[task][preset])


def fused_settings(model: Any, task: str, preset: str | None = None) -> FusedNetwork | None:
    """How ``model`` runs when it fuses: its ``fused_network`` with ``preset`` laid over it
    (:func:`apply_preset`), or ``None`` for a model without one; a :class:`UserError` for a
    preset asked of such a model."""
    own = getattr(model, "fused_network", None)
    if own is None:
        check_preset(preset)
        if preset is not None:
            name = getattr(model, "model_name", type(model).__name__)
            raise UserError(f"a preset is for models that fuse with a classical matcher "
                            f"(matchstereo-hybrid, matchflow-hybrid); {name!r} does not")
        return None
    return apply_preset(own, task, preset)
