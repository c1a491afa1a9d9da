"""The model registry: every family's names, registering in code, overrides, bundled weights
described by JSON."""

from __future__ import annotations

import json
import warnings
from pathlib import Path

import pytest
import torch
from safetensors.torch import save_file

import crossview
from crossview.errors import UserError
from crossview.models import registry
from crossview.models.matchstereo import MatchStereo, MatchStereoConfig
from crossview.models.matchstereo.specs import register_bundled
from crossview.settings import SettingError


def test_builtin_names_and_tasks() -> None:
    assert registry.get_spec("MatchStereo-T").task == "stereo"
    assert registry.get_spec("matchflow-b").task == "flow"
    assert registry.get_spec("matchstereo-b").weights_path is None
    with pytest.raises(UserError, match=r"choose one of: .*matchstereo-t"):
        registry.get_spec("matchstereo-xxl")
    with pytest.raises(TypeError, match=r"^the model name must be a string, got None; choose "):
        registry.get_spec(None)


def test_register_twice_needs_replace() -> None:
    spec = registry.ModelSpec("reg-test", MatchStereo, "stereo")
    registry.register_model(spec, replace=True)
    with pytest.raises(ValueError, match="already registered"):
        registry.register_model(spec)


def test_bundled_json_description(tmp_path: Path) -> None:
    config = {"dims": [8, 16, 16, 24], "encoder_depths": [1, 1, 1, 1],
              "decoder_layers": [1, 1, 1, 1], "heads": 2, "encoder_head": 0}
    model = MatchStereo(MatchStereoConfig(**{k: tuple(v) if isinstance(v, list) else v
                                             for k, v in config.items()}))
    state = {k: torch.randn_like(v) for k, v in model.state_dict().items()}
    save_file(state, tmp_path / "mini.safetensors")
    (tmp_path / "mini.json").write_text(json.dumps(
        {"name": "bundled-mini", "task": "stereo", "config": config, "description": "test",
         "lri": True}))
    register_bundled(tmp_path)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # bundled weights: no random-weights warning
        loaded = crossview.load_model("bundled-mini")
    assert torch.equal(loaded.state_dict()["up_masks.4.2.bias"], state["up_masks.4.2.bias"])
    # inference defaults travel from the JSON to the loaded model
    assert loaded.lri_by_default and not loaded.refine_by_default
    (tmp_path / "broken.json").write_text("{\"name\": \"x\"}")
    with pytest.raises(ValueError, match=r"broken\.json"):
        register_bundled(tmp_path)


@pytest.mark.parametrize(("name", "task"), [
    ("matchstereo-t", "stereo"), ("matchstereo-hybrid", "stereo"), ("matchstereo-mini", "stereo"),
    ("matchflow-b", "flow"), ("matchflow-hybrid", "flow"), ("matchflow-mini", "flow"),
    ("transformatcher", "semantic"), ("multiview", "novel-view"),
])
def test_every_family_is_listed_with_its_task(name: str, task: str) -> None:
    assert name in crossview.list_models()
    assert name in crossview.list_models(task)
    assert registry.get_spec(name).task == task


def test_list_models_by_task_partitions_the_names() -> None:
    tasks = {registry.get_spec(name).task for name in crossview.list_models()}
    by_task = [name for task in sorted(tasks) for name in crossview.list_models(task)]
    assert sorted(by_task) == crossview.list_models()
    assert crossview.list_models("no-such-task") == []


def test_overrides_replace_config_fields_and_are_checked() -> None:
    model = registry.get_spec("matchstereo-t").build(decoder_layers=(1, 1, 1, 1), heads=2)
    assert model.config.decoder_layers == (1, 1, 1, 1) and model.config.heads == 2
    assert registry.get_spec("multiview").build(depth=1).config.depth == 1
    with pytest.raises(SettingError, match=r"overrides\.heads"):
        registry.get_spec("matchstereo-t").build(heads=0)
    with pytest.raises(SettingError, match=r"unknown key 'overrides\.colour'"):
        registry.get_spec("multiview").build(colour="red")


def test_load_model_serves_every_family() -> None:
    matcher = crossview.load_model("transformatcher")
    assert matcher.model_name == "transformatcher" and matcher.task == "semantic"
    assert matcher.weights_source.endswith("transformatcher_lite0.safetensors")
    with pytest.warns(crossview.api.RandomWeightsWarning, match="multiview has no weights"):
        viewer = crossview.load_model("multiview", conditioning="gta", depth=1)
    assert viewer.config.conditioning == "gta" and viewer.weights_source is None
    random = crossview.api.build_model("matchstereo-mini")
    bundled = crossview.load_model("matchstereo-mini")
    assert random.weights_source is None and random.task == "stereo"
    assert not torch.equal(random.state_dict()["up_masks.4.2.bias"],
                           bundled.state_dict()["up_masks.4.2.bias"])
