"""The semantic recipe (TransforMatcher on synthetic warps): data, losses, which tensors train,
init weights, export, the command line. Resume and torchrun: tests/train/test_recipes.py."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch
import yaml
from recipe_configs import tiny_config
from safetensors import safe_open

from crossview.cli.app import main
from crossview.experiments.semantic_warps import evaluate_warps
from crossview.models.transformatcher.bundle import export_transformatcher
from crossview.models.transformatcher.inference import load_transformatcher
from crossview.models.transformatcher.model import TransforMatcher
from crossview.train.config import config_from_dict
from crossview.train.trainer import Trainer


def trainer(out_dir: Path, init: Path | None = None, steps: int = 1, **recipe: object
            ) -> Trainer:
    values = tiny_config("semantic", out_dir, steps=steps)
    values["recipe"] = {**values["recipe"], **recipe}
    run = Trainer(config_from_dict(values), init_weights=init, progress=False)
    run.run()
    return run


def cli(argv: list[str]) -> int:
    with pytest.raises(SystemExit) as done:
        main(argv)
    return done.value.code or 0


@pytest.fixture(scope="module")
def imagenet() -> dict[str, torch.Tensor]:
    """The backbone's full state with its ImageNet weights."""
    return {k: v.clone() for k, v in TransforMatcher(grid=3).backbone.state_dict().items()}


def _is_bn_statistic(key: str) -> bool:
    return key.endswith(("running_mean", "running_var", "num_batches_tracked"))


def test_frozen_backbone_stays_bit_identical(tmp_path, imagenet) -> None:
    run = trainer(tmp_path, steps=2, backbone_lr=0.0)
    for key, value in run.model.backbone.state_dict().items():
        assert torch.equal(value, imagenet[key]), key
    assert not run.model.backbone_tuned and len(run.optimizer.param_groups) == 1


def test_tuned_backbone_trains_its_feature_layers_only(tmp_path, imagenet) -> None:
    run = trainer(tmp_path, steps=2, backbone_lr=1e-3)
    state = run.model.backbone.state_dict()
    changed = {k for k, v in state.items() if not torch.equal(v, imagenet[k])}
    params = dict(run.model.backbone.named_parameters())
    assert {"_conv_stem.weight", "_bn0.weight", "_blocks.15._project_conv.weight"} <= changed
    assert len(changed) > 0.9 * sum(not k.startswith(("_conv_head", "_bn1", "_fc"))
                                    for k in params)
    # The ImageNet classifier (never used) and every BatchNorm running statistic stay as loaded.
    assert not any(k.startswith(("_conv_head", "_bn1", "_fc")) for k in changed)
    assert not any(_is_bn_statistic(k) for k in changed)
    assert [g["lr"] for g in run.optimizer.param_groups] == [1e-3, 1e-3]
    assert len(run.optimizer.param_groups[1]["params"]) == sum(
        not k.startswith(("_conv_head", "_bn1", "_fc")) for k in params)


def test_export_load_round_trip_and_evaluation(tmp_path) -> None:
    run = trainer(tmp_path / "run", backbone_lr=1e-3)
    path = export_transformatcher(run.model, tmp_path / "w.safetensors", {"steps": "1"})
    with safe_open(str(path), "pt") as handle:
        meta = handle.metadata()
    assert meta["task"] == "semantic" and meta["backbone_tuned"] == "True"
    assert meta["backbone"] == "efficientnet-lite0" and meta["steps"] == "1"
    loaded = load_transformatcher(path)
    assert loaded.backbone_tuned
    for key, value in run.model.state_dict().items():  # head, tuned backbone, classifier
        assert torch.equal(loaded.state_dict()[key], value), key
    # The held-out study reports the raw arg-max of both backbones; the ImageNet one equals what
    # the untuned model reports as its own raw arg-max.
    plain = TransforMatcher(grid=3)
    both = evaluate_warps(run.model, pairs=2, keypoints=6, batch=2, imagenet=plain)
    alone = evaluate_warps(plain, pairs=2, keypoints=6, batch=2)
    assert both["raw_imagenet"] == alone["raw"] and "raw_imagenet" not in alone
    for name in ("raw", "raw_softargmax", "refined", "oracle"):
        assert 0 <= alone[name]["pck@0.05"] <= alone[name]["pck@0.1"] <= 100


def test_init_weights_start_the_model_and_a_tuned_file_keeps_its_backbone(tmp_path) -> None:
    tuned = trainer(tmp_path / "a", backbone_lr=1e-3).model
    path = export_transformatcher(tuned, tmp_path / "tuned.safetensors", {})
    started = Trainer(config_from_dict(tiny_config("semantic", tmp_path / "b")),
                      init_weights=path, progress=False).model
    for key, value in tuned.trained_state_dict().items():
        assert torch.equal(started.trained_state_dict()[key], value), key
    frozen = trainer(tmp_path / "c", init=path, backbone_lr=0.0).model
    for key, value in tuned.backbone_state_dict().items():
        assert torch.equal(frozen.backbone_state_dict()[key], value), key


def test_crossview_train_exports_with_its_recipe(tmp_path) -> None:
    """``crossview train`` of a semantic config: ``recipe.shift`` changes the training data and
    is recorded in the export."""
    losses = {}
    for name, shift in (("plain", 0.0), ("again", 0.0), ("shifted", 0.3)):
        values = tiny_config("semantic", tmp_path / name, steps=1)
        values["recipe"] = {**values["recipe"], "shift": shift}
        config = tmp_path / f"{name}.yaml"
        config.write_text(yaml.safe_dump(values))
        assert cli(["train", str(config), "--export", str(tmp_path / f"{name}.safetensors")]) == 0
        first = (tmp_path / name / "log.jsonl").read_text().splitlines()[0]
        losses[name] = json.loads(first)["loss"]
    assert losses["plain"] == losses["again"] != losses["shifted"]
    with safe_open(str(tmp_path / "shifted.safetensors"), "pt") as f:
        meta = f.metadata()
    assert meta["shift"] == "0.3" and meta["task"] == "semantic" and meta["steps"] == "1"
    assert not (tmp_path / "shifted.json").exists()  # no registry description for this family


@pytest.mark.parametrize(("change", "message"), [
    ({"recipe": {"shift": 1.5}}, "config: recipe.shift must be in [0, 1), got 1.5"),
    ({"recipe": {"backbone_lr": -1e-5}}, "config: recipe.backbone_lr must be >= 0"),
    ({"recipe": {"keypoint": 3}}, "config: unknown key 'recipe.keypoint'"),
    ({"model": {"name": "transformatcher", "overrides": {"attention": "soft"}}},
     "config: model.overrides.attention must be one of 'additive', 'standard', got 'soft'"),
    ({"model": {"name": "matchstereo-t"}}, "config: model.name is 'matchstereo-t', but a "
                                           "semantic run trains 'transformatcher'"),
    ({"data": {"train": "synthetic-stereo"}}, "config: data.train is 'synthetic-stereo', but "
                                              "a semantic run reads 'synthetic-warps'"),
])
def test_config_mistakes_are_one_line_and_nothing_is_written(tmp_path, capsys, change: dict,
                                                              message: str) -> None:
    values = tiny_config("semantic", tmp_path / "run")
    values = {**values, **{k: {**values.get(k, {}), **v} for k, v in change.items()}}
    config = tmp_path / "c.yaml"
    config.write_text(yaml.safe_dump(values))
    assert cli(["train", str(config)]) == 2
    err = capsys.readouterr().err
    assert message in err and len(err.strip().splitlines()) == 1, err
    assert not (tmp_path / "run").exists()


def test_resume_refuses_another_backbone_choice(tmp_path, capsys) -> None:
    values = tiny_config("semantic", tmp_path / "run", steps=1)
    config = tmp_path / "c.yaml"
    config.write_text(yaml.safe_dump(values))
    assert cli(["train", str(config)]) == 0
    values["recipe"] = {**values["recipe"], "backbone_lr": 0.0}
    config.write_text(yaml.safe_dump(values))
    capsys.readouterr()
    assert cli(["train", str(config), "--resume", "--steps", "1"]) == 2
    assert "the config's 'recipe' section differs" in capsys.readouterr().err
