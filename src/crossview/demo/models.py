"""The models a tab offers and their loading: the registered models of the tab's task that run
without the network (bundled weights, or published weights already in the cache), the
command's default first; each loaded once and kept for the next request."""

from __future__ import annotations

import functools

from torch import nn

from crossview import api
from crossview.defaults import DEFAULT_MODELS

OFFLINE_WEIGHTS = ("bundled", "published, in the cache")


def choices(task: str) -> list[str]:
    """The models of ``task`` (``"stereo"`` or ``"flow"``) that run offline, its default
    first."""
    default = DEFAULT_MODELS[task]
    offline = [name for name in api.list_models(task)
               if api.model_info(name).weights in OFFLINE_WEIGHTS]
    return [default, *sorted(name for name in offline if name != default)]


@functools.lru_cache(maxsize=4)
def load(task: str, name: str) -> nn.Module:
    """The model ``name`` for ``task`` (a :class:`~crossview.errors.UserError` for a model of
    another task), loaded once."""
    return api.load_task_model(name, task, purpose=f"the demo's {task} tab")
