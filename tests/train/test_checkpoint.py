"""Checkpoints and exported weights: what the files record, and how unreadable ones are told."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest
import torch

from crossview.errors import UserError
from crossview.models.matchstereo import MatchStereo, MatchStereoConfig
from crossview.models.weights import load_weights, read_safetensors
from crossview.train.build import load_init_weights
from crossview.train.checkpoint import export_weights

TINY = MatchStereoConfig(dims=(8, 8, 8, 8), encoder_depths=(1, 1, 1, 1),
                         decoder_layers=(1, 1, 1, 1), radii=(1, 1, 1, 1), heads=2, encoder_head=0)


def test_exported_weights_record_task_name_and_config(tmp_path: Path) -> None:
    model = MatchStereo(TINY, task="flow")
    path = tmp_path / "mini-flow.safetensors"
    export_weights(model, path, name="mini-flow", task="flow")
    tensors, metadata = read_safetensors(path)
    assert metadata["task"] == "flow" and metadata["name"] == "mini-flow"
    config = {k: tuple(v) if isinstance(v, list) else v
              for k, v in json.loads(metadata["config"]).items()}
    assert MatchStereoConfig(**config) == TINY
    assert all(torch.equal(tensors[k], v) for k, v in model.state_dict().items())
    load_weights(MatchStereo(TINY, task="flow"), path)
    with pytest.raises(UserError, match="records task 'flow' but 'stereo' weights"):
        load_weights(MatchStereo(TINY, task="stereo"), path)


def test_growing_from_weights_of_the_other_task_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "stereo.safetensors"
    export_weights(MatchStereo(TINY), path, name="s", task="stereo")
    deeper = MatchStereo(dataclasses.replace(TINY, decoder_layers=(2, 2, 2, 2)), task="flow")
    with pytest.raises(UserError, match=f"{path}: the file records task 'stereo' but 'flow'"):
        load_init_weights(deeper, path, grow=True)
