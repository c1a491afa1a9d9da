"""Every recipe gets the loop's resume, kill -9 safety and torchrun: tiny runs of each."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
import torch
import yaml
from recipe_configs import TINY, tiny_config

from crossview.errors import UserError
from crossview.train.checkpoint import latest_checkpoint, load_checkpoint
from crossview.train.config import config_from_dict
from crossview.train.recipes import RECIPES, get_recipe
from crossview.train.trainer import Trainer
from hang_guard import HANG_GUARD_SECONDS
from ranks import finish_ranks, start_ranks

HERE = Path(__file__).parent
TASKS = list(TINY)
# stereo and flow share one recipe class (fields.py): the subprocess tests run it once
RECIPE_KINDS = ["stereo", "semantic", "novel-view"]


def train(task: str, out_dir: Path, resume: bool = False, stop_after: int | None = None,
          **train: object) -> Trainer:
    trainer = Trainer(config_from_dict(tiny_config(task, out_dir, **train)), resume=resume,
                      progress=False, on_step=lambda step, logs: step == stop_after)
    trainer.run()
    return trainer


def assert_same_state(found: dict, expected: dict) -> None:
    assert set(found) == set(expected)
    for key, value in expected.items():
        torch.testing.assert_close(found[key], value, rtol=0, atol=0, msg=key)


def test_every_task_has_a_recipe_and_a_tiny_test_config() -> None:
    assert set(RECIPES.keys()) == set(TINY) == {"stereo", "flow", "semantic", "novel-view",
                                         "multiview-depth"}
    with pytest.raises(UserError, match=r"task must be one of .*, got 'depth' \(no training"):
        get_recipe("depth")


@pytest.mark.parametrize("task", TASKS)
def test_resume_continues_as_if_never_stopped(tmp_path: Path, task: str) -> None:
    straight = train(task, tmp_path / "a")
    stopped = train(task, tmp_path / "b", stop_after=2)
    assert stopped.step == 2 and latest_checkpoint(tmp_path / "b").name == "step-00000002.pt"
    resumed = train(task, tmp_path / "b", resume=True)
    assert resumed.step == 3
    assert_same_state(resumed.model.state_dict(), straight.model.state_dict())
    assert_same_state(resumed.optimizer.state_dict()["state"],
                      straight.optimizer.state_dict()["state"])
    log = [json.loads(line) for line in (tmp_path / "b" / "log.jsonl").read_text().splitlines()]
    best_key = get_recipe(task).best[0]
    assert [r["step"] for r in log if r["kind"] == "val"] == [2, 3]
    assert all(best_key in r for r in log if r["kind"] == "val")


@pytest.mark.parametrize("task", RECIPE_KINDS)
def test_kill_9_then_resume_is_identical(tmp_path: Path, task: str) -> None:
    script = textwrap.dedent(f"""
        import os, signal, sys
        sys.path[:0] = [{str(HERE)!r}]
        from pathlib import Path
        from recipe_configs import tiny_config
        from crossview.train.config import config_from_dict
        from crossview.train.trainer import Trainer
        def die(step, logs):
            if step == 2:
                os.kill(os.getpid(), signal.SIGKILL)
        cfg = config_from_dict(tiny_config({task!r}, Path(sys.argv[1])))
        Trainer(cfg, progress=False, on_step=die).run()
    """)
    killed = tmp_path / "killed"
    result = subprocess.run([sys.executable, "-c", script, str(killed)], capture_output=True,
                            text=True, timeout=HANG_GUARD_SECONDS)
    assert result.returncode == -signal.SIGKILL, result.stderr
    assert latest_checkpoint(killed).name == "step-00000001.pt"
    resumed = train(task, killed, resume=True)
    straight = train(task, tmp_path / "straight")
    assert_same_state(resumed.model.state_dict(), straight.model.state_dict())


@pytest.mark.parametrize("task", RECIPE_KINDS)
def test_torchrun_two_processes_equal_one(tmp_path: Path, task: str) -> None:
    """``crossview train`` on 2 gloo ranks (a global batch of 2: one sample each) ends with the
    parameters of one process; rank 0 alone writes."""
    config = tmp_path / "two.yaml"
    config.write_text(yaml.safe_dump(tiny_config(task, tmp_path / "two", val_every=3,
                                                 ckpt_every=3)))
    argv = [sys.executable, "-m", "crossview", "train", str(config)]
    for code, _, err in finish_ranks(start_ranks(argv, [0, 1], 2)):
        assert code == 0, err
    train(task, tmp_path / "one", val_every=3, ckpt_every=3)  # the one-process reference
    single = load_checkpoint(tmp_path / "one" / "step-00000003.pt")
    parallel = load_checkpoint(tmp_path / "two" / "step-00000003.pt")
    assert sorted(p.name for p in (tmp_path / "two").iterdir()) == sorted(
        p.name for p in (tmp_path / "one").iterdir())
    torch.manual_seed(0)
    init = get_recipe(task).build_model(config_from_dict(tiny_config(task, tmp_path)))
    init = init.state_dict()
    steps_one, steps_two = [], []
    for key, value in single["model"].items():
        if not value.is_floating_point():
            assert torch.equal(parallel["model"][key], value), key
            continue
        steps_one.append((value - init[key]).flatten())
        steps_two.append((parallel["model"][key] - init[key]).flatten())
    # Adam turns reduction-order rounding of near-cancelling gradients (a bias before a norm)
    # into sign flips of single small moves: compare the whole update, not each entry
    one_update, two_update = torch.cat(steps_one), torch.cat(steps_two)
    assert float(one_update.norm()) > 1e-3
    assert float((two_update - one_update).norm()) < 0.05 * float(one_update.norm())
    val_one, val_two = (
        [json.loads(line) for line in (tmp_path / name / "log.jsonl").read_text().splitlines()
         if '"val"' in line] for name in ("one", "two"))
    assert [set(r) for r in val_two] == [set(r) for r in val_one] and len(val_one) == 1


@pytest.mark.parametrize(("task", "change", "message"), [
    ("novel-view", {"recipe": {"views": 4, "context": 3}},
     "config: recipe.context + targets (3 + 2) must be at most views (4)"),
    ("novel-view", {"recipe": {"zoom": [3.0, 1.0]}},
     "config: recipe.zoom must be [low, high] with low <= high, got [3.0, 1.0]"),
    ("novel-view", {"model": {"name": "multiview", "overrides": {"conditioning": "rope"}}},
     "config: model.overrides.conditioning must be one of 'plucker', 'naive'"),
    ("novel-view", {"data": {"height": 20}},
     "config: data.height x data.width is 20x16, not a multiple of model.overrides.patch (8)"),
    ("multiview-depth", {"recipe": {"separation": [20.0, 5.0]}},
     "config: recipe.separation must be [low, high] with low <= high, got [20.0, 5.0]"),
    ("multiview-depth", {"recipe": {"views": 1}}, "config: recipe.views must be >= 2"),
    ("multiview-depth", {"model": {"name": "multiview-depth",
                                   "overrides": {"conditioning": "rope"}}},
     "config: model.overrides.conditioning must be one of 'plucker', 'naive'"),
    ("multiview-depth", {"model": {"name": "multiview"}},
     "config: model.name is 'multiview', but a multiview-depth run trains 'multiview-depth'"),
    ("multiview-depth", {"data": {"train": "camera-scenes"}},
     "config: data.train is 'camera-scenes', but a multiview-depth run reads 'depth-scenes'"),
    ("stereo", {"recipe": {"keypoints": 3}}, "config: unknown key 'recipe.keypoints'"),
    ("stereo", {"data": {"train": "camera-scenes"}},
     "config: data.train is 'camera-scenes', but a stereo run reads 'synthetic-stereo'"),
])
def test_recipe_config_mistakes_are_one_user_error(tmp_path: Path, task: str, change: dict,
                                                   message: str) -> None:
    values = tiny_config(task, tmp_path / "run")
    values = {**values, **{k: {**values.get(k, {}), **v} for k, v in change.items()}}
    with pytest.raises(UserError) as error:
        Trainer(config_from_dict(values), progress=False)
    assert str(error.value).startswith(message) and "\n" not in str(error.value)
    assert not (tmp_path / "run").exists()
