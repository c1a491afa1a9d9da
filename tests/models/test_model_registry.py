"""The model registry: built-in names, registering in code, bundled weights described by JSON."""

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
        {"name": "bundled-mini", "task": "stereo", "config": config, "description": "test"}))
    registry._register_bundled(tmp_path)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # bundled weights: no random-weights warning
        loaded = crossview.load_model("bundled-mini")
    assert torch.equal(loaded.state_dict()["up_masks.4.2.bias"], state["up_masks.4.2.bias"])
    (tmp_path / "broken.json").write_text("{\"name\": \"x\"}")
    with pytest.raises(ValueError, match=r"broken\.json"):
        registry._register_bundled(tmp_path)
