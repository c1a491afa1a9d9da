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
from crossview.models.transformatcher.inference import load_transformatcher
from crossview.models.transformatcher.model import TransforMatcher
from crossview.models.transformatcher.softargmax import (
    normalised_to_pixels,
    pixels_to_normalised,
    soft_sample,
)
from crossview.train.config import config_from_dict
from crossview.train.recipes.semantic import (
    dense_loss,
    export_transformatcher,
    oracle_coords,
    warp_batch,
    warp_dataset,
)
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


def test_warp_batch_keypoints_follow_the_flow() -> None:
    data = warp_dataset("train", 48, 2, seed=0, keypoints=5)
    batch = warp_batch(data, [0, 1])
    assert batch["src"].shape == (2, 3, 48, 48) and batch["kp_src"].shape == (2, 5, 2)
    sample = data[0]
    x, y = batch["kp_src"][0, 0].long().tolist()
    expected = batch["kp_src"][0, 0] + sample["flow"][:, y, x]
    torch.testing.assert_close(batch["kp_tgt"][0, 0], expected)


def test_oracle_coords_transfer_keypoints_through_the_exact_flow() -> None:
    data = warp_dataset("heldout", 96, 2, seed=1, keypoints=16)
    b = warp_batch(data, [0, 1])
    coords = oracle_coords(b["flow"], 12)
    assert coords.shape == (2, 12, 12, 2)
    # Cell centre (x, y) = (8 i + 3.5, 8 j + 3.5) px: its target is that point plus the flow.
    x, y = 8 * 5 + 3.5, 8 * 2 + 3.5
    x0, y0 = int(x), int(y)  # halfway between four pixels: bilinear = their mean
    fx, fy = b["flow"][0, :, y0:y0 + 2, x0:x0 + 2].mean(dim=(1, 2))
    expected = pixels_to_normalised(torch.tensor([x + fx, y + fy]), 96, 96)
    torch.testing.assert_close(coords[0, 2, 5], expected, atol=1e-5, rtol=0)
    # Soft-sampled keypoints land close to their true matches (the warps are smooth).
    pred = soft_sample(coords, pixels_to_normalised(b["kp_src"], 96, 96), 0.05)
    err = (normalised_to_pixels(pred, 96, 96) - b["kp_tgt"]).norm(dim=-1)
    assert err.median() < 2.0


def test_oracle_in_the_grid_frame_and_dense_loss() -> None:
    data = warp_dataset("heldout", 96, 2, seed=1, keypoints=16)
    b = warp_batch(data, [0, 1])
    shift = 1 / 6 - 1 / 96  # TransforMatcher(grid=6).frame_shift
    coords = oracle_coords(b["flow"], 12, shift)
    # Grid-frame cell (5, 2) is centred at image pixel (8 * 5 + 3.5 - 7.5, 8 * 2 + 3.5 - 7.5).
    x, y = 8 * 5 - 4.0, 8 * 2 - 4.0
    fx, fy = b["flow"][0, :, int(y), int(x)]  # integer pixel: no interpolation
    expected = pixels_to_normalised(torch.tensor([x + fx, y + fy]), 96, 96) + shift
    torch.testing.assert_close(coords[0, 2, 5], expected, atol=1e-5, rtol=0)
    kp = pixels_to_normalised(b["kp_src"], 96, 96)
    pred = soft_sample(coords, kp + shift, 0.05) - shift
    err = (normalised_to_pixels(pred, 96, 96) - b["kp_tgt"]).norm(dim=-1)
    assert err.median() < 2.0
    # The dense loss is 0 at the exact correspondence and |offset| for a constant offset.
    assert b["valid"].shape == (2, 96, 96) and b["valid"].dtype == torch.bool
    assert dense_loss(coords, b["flow"], b["valid"], shift).item() < 1e-6
    offset = torch.tensor([0.03, -0.04])
    loss = dense_loss(coords + offset, b["flow"], b["valid"], shift)
    torch.testing.assert_close(loss, offset.norm())
    # Cells whose centre has no valid match are ignored.
    wrong = coords.clone()
    b["valid"][0, :48] = False
    wrong[0, :5] += 1.0  # cell rows 0-4 (centres above pixel 36) are all invalid now
    torch.testing.assert_close(dense_loss(wrong, b["flow"], b["valid"], shift),
                               dense_loss(coords, b["flow"], b["valid"], shift), atol=1e-6,
                               rtol=0)
