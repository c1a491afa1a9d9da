"""The demo's speed choice: its field on the stereo and flow tabs, sent to the Run buttons, and
disabled (back on ``default``, saying why) for a model that takes no preset."""

from __future__ import annotations

import pytest

gr = pytest.importorskip("gradio", reason='the demo needs gradio: pip install "crossview[demo]"')

from crossview.defaults import PRESET_NAMES  # noqa: E402
from crossview.demo import app, speed  # noqa: E402


@pytest.mark.parametrize("tab", ["stereo", "flow"])
def test_each_dense_tab_has_the_speed_field_sent_to_its_run(tab: str) -> None:
    page = app.build()
    field = next(block for block in page.blocks.values() if block.elem_id == f"{tab}-speed")
    assert isinstance(field, gr.Radio)
    assert [value for _, value in field.choices] == ["default", *PRESET_NAMES]
    assert field.value == "default" and field.interactive  # the default model fuses
    assert "fast is the quickest, best the most accurate" in field.info
    runs = [fn for fn in page.fns.values() if fn.name == f"run_{tab}"]
    assert len(runs) == 1 and runs[0].inputs[-1] is field
    follows = [fn for fn in page.fns.values() if fn.name == "follow"
               and fn.inputs[0].elem_id == f"{tab}-model"]
    assert len(follows) == 1 and follows[0].outputs == [field]


def test_default_is_the_models_own_settings() -> None:
    assert speed.preset("default") is None and speed.preset(None) is None
    assert [speed.preset(name) for name in PRESET_NAMES] == list(PRESET_NAMES)
    assert speed.titled("m", None) == "m" and speed.titled("m", "fast") == "m (fast)"


@pytest.mark.parametrize("model", ["matchstereo-mini", "matchflow-mini"])
def test_a_model_without_presets_disables_the_choice_saying_why(model: str) -> None:
    update = speed.follow(model)
    assert (update["value"], update["interactive"]) == ("default", False)
    assert update["info"].startswith(f"{model} runs with its own settings: the presets are for")


@pytest.mark.parametrize("model", ["matchstereo-hybrid", "matchflow-hybrid"])
def test_a_fusing_model_enables_the_choice_and_keeps_it(model: str) -> None:
    update = speed.follow(model)
    assert update["interactive"] and "value" not in update
    assert update["info"] == speed.INFO
