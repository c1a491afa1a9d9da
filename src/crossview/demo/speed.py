"""The *Speed* choice of the stereo and flow tabs: ``default`` (the model's own settings) or one
of the speed presets (:data:`crossview.defaults.PRESET_NAMES`: ``fast`` the quickest, ``best``
the most accurate; :mod:`crossview.models.dense.presets`), which only models that fuse with a
classical matcher take (the bundled hybrid models). The choice follows the tab's model field:
for a model that takes no preset it goes back to ``default`` and is disabled, its note saying
why; a preset that reaches such a model anyway (Gradio's API) is answered in the page with the
library's message (:mod:`crossview.demo.errors`).
"""

from __future__ import annotations

from typing import Any

import gradio as gr

from crossview.defaults import PRESET_NAMES
from crossview.demo.errors import in_page
from crossview.models import registry

DEFAULT = "default"
CHOICES = (DEFAULT, *PRESET_NAMES)
INFO = ("fast is the quickest, best the most accurate, default the model's own settings; for "
        "the bundled hybrid models (they fuse with a classical matcher)")


def preset(speed: str | None) -> str | None:
    """The field's value -> the ``preset`` of :func:`crossview.api.estimate_disparity` and
    :func:`~crossview.api.estimate_flow` (``None`` for ``default``)."""
    return None if speed in (None, "", DEFAULT) else speed


def takes_preset(model: str | None) -> bool:
    """Whether the registered model ``model`` fuses with a classical matcher (``fused_network``
    set), the models that take a preset."""
    return bool(model) and registry.get_spec(model).fused_network is not None


def titled(model: str, preset: str | None) -> str:
    """How a summary names the run: the model, and the preset where one was chosen."""
    return model if preset is None else f"{model} ({preset})"


@in_page
def follow(model: str | None) -> dict[str, Any]:
    """The model field changed: the speed field's update (see the module docstring)."""
    if takes_preset(model):
        return gr.update(interactive=True, info=INFO)
    return gr.update(value=DEFAULT, interactive=False,
                     info=f"{model} runs with its own settings: the presets are for the "
                          "bundled hybrid models, which fuse with a classical matcher")


def field(model: gr.Dropdown, elem_id: str) -> gr.Radio:
    """The speed field of a tab whose model field is ``model``, following it."""
    speed = gr.Radio(list(CHOICES), value=DEFAULT, label="Speed", info=INFO, elem_id=elem_id,
                     interactive=takes_preset(model.value))
    model.change(follow, model, speed, show_progress="hidden")
    return speed
