"""Checkpoints and exported weights: what the files record, and how unreadable ones are told."""

from __future__ import annotations

import dataclasses
import json
import math
from pathlib import Path

import pytest
import torch

from crossview.errors import UserError
from crossview.models.matchstereo import MatchStereo, MatchStereoConfig
from crossview.models.matchstereo.bundle import write_bundle
from crossview.models.weights import load_weights, read_safetensors
from crossview.train.build import load_init_weights
from crossview.train.checkpoint import (
    checkpoint_path,
    load_checkpoint,
    prune_checkpoints,
    repair_best,
    save_checkpoint,
    step_checkpoints,
    usable_checkpoint,
)

TINY = MatchStereoConfig(dims=(8, 8, 8, 8), encoder_depths=(1, 1, 1, 1),
                         decoder_layers=(1, 1, 1, 1), radii=(1, 1, 1, 1), heads=2, encoder_head=0)


def test_exported_weights_record_task_name_and_config(tmp_path: Path) -> None:
    model = MatchStereo(TINY, task="flow")
    path = tmp_path / "mini-flow.safetensors"
    write_bundle(model, path, name="mini-flow", task="flow")
    tensors, metadata = read_safetensors(path)
    assert metadata.keys() == {"task", "name", "config"}
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
    write_bundle(MatchStereo(TINY), path, name="s", task="stereo")
    deeper = MatchStereo(dataclasses.replace(TINY, decoder_layers=(2, 2, 2, 2)), task="flow")
    with pytest.raises(UserError, match=f"{path}: the file records task 'stereo' but 'flow'"):
        load_init_weights(deeper, path, grow=True)


def _steps(run: Path, *contents: bytes | dict | list) -> list[Path]:
    paths = []
    for step, content in enumerate(contents, start=1):
        path = run / f"step-{step:08d}.pt"
        if isinstance(content, bytes):
            path.write_bytes(content)
        else:
            save_checkpoint(path, content)
        paths.append(path)
    return paths


def test_the_newest_usable_checkpoint_is_used_and_newer_ones_set_aside(tmp_path: Path) -> None:
    good = {"model": {"w": torch.ones(2)}, "step": 2}
    first, second, third, fourth = _steps(tmp_path, {**good, "step": 1}, good, b"junk",
                                          {"model": {}})
    path, state, notes = usable_checkpoint(tmp_path, ["model", "step"])
    assert path == second and state["step"] == 2
    assert notes == [f"{fourth}: not a crossview training checkpoint (no 'step'); renamed to "
                     f"{fourth.name}.unreadable",
                     f"{third}: cannot read checkpoint (not a PyTorch checkpoint); renamed to "
                     f"{third.name}.unreadable"]
    assert step_checkpoints(tmp_path) == [first, second]  # pruning now keeps intact files
    prune_checkpoints(tmp_path, keep_last=1)
    assert sorted(p.name for p in tmp_path.iterdir()) == [
        second.name, f"{third.name}.unreadable", f"{fourth.name}.unreadable"]


def test_without_set_aside_nothing_is_renamed(tmp_path: Path) -> None:
    first, second = _steps(tmp_path, {"step": 1}, b"")
    path, _, notes = usable_checkpoint(tmp_path, ["step"], set_aside=False)
    assert path == first and notes == [f"{second}: cannot read checkpoint (not a PyTorch "
                                       "checkpoint)"]
    assert step_checkpoints(tmp_path) == [first, second]


def test_no_usable_checkpoint_names_the_newest(tmp_path: Path) -> None:
    with pytest.raises(UserError, match="no checkpoint"):
        usable_checkpoint(tmp_path, ["step"])
    _, newest = _steps(tmp_path, b"x", [1])
    with pytest.raises(UserError) as error:
        usable_checkpoint(tmp_path, ["step"])
    assert str(error.value) == (f"{newest}: not a crossview checkpoint (it holds a list, not a "
                                f"dict) nor the 1 older one; no usable checkpoint left in "
                                f"{tmp_path}")
    assert len(step_checkpoints(tmp_path)) == 2


def _state(step: int, metric: float) -> dict:
    return {"step": step, "best_metric": metric, "model": {"w": torch.full((2,), float(step))}}


# best.pt as (step, metric), junk or absent; the resumed step checkpoint (step, best metric);
# the step the log says the best metric was measured at (the run's checkpoints are steps
# 4 and 6, holding that metric); the warning; the step best.pt holds afterwards
@pytest.mark.parametrize(("best", "resumed", "best_step", "message", "after"), [
    ((6, 1.0), (6, 1.0), 6, None, 6),  # up to date
    ((8, 0.5), (6, 1.0), 6, None, 8),  # ahead: written just before a kill; the run rewrites it
    (None, (6, math.inf), None, None, None),  # nothing validated yet
    ((3, 2.0), (6, 1.0), 6, "best.pt was stale (step 3, metric 2); replaced by step-00000006.pt, "
                            "the checkpoint of the best validation (metric 1 at step 6)", 6),
    (None, (6, 1.0), 6, "best.pt was missing; replaced by step-00000006.pt", 6),
    (b"junk", (6, 1.0), 6, "best.pt was unreadable; replaced by step-00000006.pt", 6),
    ((3, 2.0), (6, 1.0), 5, "best.pt is stale (step 3, metric 2), but the checkpoint of the "
                            "best validation (metric 1, step 5) is gone; best.pt left as it is", 3),
    ((3, 2.0), (6, 1.0), None, "the checkpoint of the best validation (metric 1, step unknown) "
                               "is gone", 3),
])
def test_repair_best(tmp_path: Path, best: tuple | bytes | None, resumed: tuple,
                     best_step: int | None, message: str | None, after: int | None) -> None:
    if isinstance(best, bytes):
        (tmp_path / "best.pt").write_bytes(best)
    elif best is not None:
        save_checkpoint(tmp_path / "best.pt", _state(*best))
    for step in (4, 6):
        save_checkpoint(checkpoint_path(tmp_path, step), _state(step, resumed[1]))
    said = repair_best(tmp_path, *resumed, best_step=best_step)
    if message is None:
        assert said is None
    else:
        assert said is not None and said.startswith(f"{tmp_path / 'best.pt'} ") and message in said
    if after is None:
        assert not (tmp_path / "best.pt").exists()
    else:
        assert load_checkpoint(tmp_path / "best.pt")["step"] == after
