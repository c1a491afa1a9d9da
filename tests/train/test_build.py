from __future__ import annotations

import pytest
import torch
from real_scenes import write_real_scenes

from crossview.data.synthetic.flow import FlowConfig, SyntheticFlow
from crossview.data.synthetic.stereo import StereoConfig, SyntheticStereo
from crossview.errors import UserError
from crossview.train.build import (
    build_datasets,
    build_model,
    flow_training_sample,
    stereo_training_sample,
)
from crossview.train.config import config_from_dict


def test_stereo_sample_layout() -> None:
    raw = SyntheticStereo(1, config=StereoConfig(size=(32, 48)))[0]
    sample = stereo_training_sample(raw)
    assert sample["gt"].shape == (2, 32, 48, 2) and sample["valid"].shape == (2, 32, 48)
    assert torch.equal(sample["gt"][0, ..., 0], -raw["disparity"])
    assert torch.equal(sample["gt"][1, ..., 0], raw["disparity1"])
    assert not sample["gt"][..., 1].any()


def test_flow_sample_layout() -> None:
    raw = SyntheticFlow(1, config=FlowConfig(size=(32, 48)))[0]
    sample = flow_training_sample(raw)
    assert sample["gt"].shape == (2, 32, 48, 2)
    assert torch.equal(sample["gt"][0, 5, 7], raw["flow"][:, 5, 7])
    assert torch.equal(sample["gt"][1, 5, 7], raw["flow_backward"][:, 5, 7])


def test_datasets_and_model_from_config() -> None:
    cfg = config_from_dict({"data": {"train_size": 3, "val_size": 2, "height": 32,
                                     "width": 48},
                            "model": {"overrides": {"dims": [8, 8, 8, 8], "heads": 2}}})
    train, val = build_datasets(cfg)
    assert len(train) == 3 and len(val) == 2
    assert not torch.equal(train[0]["img0"], val[0]["img0"])  # different streams
    model = build_model(cfg)
    assert model.config.dims == (8, 8, 8, 8) and model.task == "stereo"
    with pytest.raises(UserError, match="overrides"):
        build_model(config_from_dict({"model": {"overrides": {"depth": 3}}}))
    with pytest.raises(UserError, match="flow model"):
        build_model(config_from_dict({"task": "stereo", "model": {"name": "matchflow-b"}}))


@pytest.mark.parametrize("task", ["stereo", "flow"])
@pytest.mark.parametrize("augment", ["standard", "camera"])
def test_augmented_training_crops_to_the_size_and_leaves_validation_clean(task: str,
                                                                          augment: str) -> None:
    data = {"train": f"synthetic-{task}", "val": f"synthetic-{task}", "train_size": 2,
            "val_size": 1, "height": 32, "width": 48}
    plain_train, plain_val = build_datasets(config_from_dict({"task": task, "data": data}))
    train, val = build_datasets(config_from_dict(
        {"task": task, "data": {**data, "augment": augment, "render_scale": 1.5}}))
    assert train[0]["img0"].shape == (3, 32, 48) and train[0]["gt"].shape == (2, 32, 48, 2)
    assert not torch.equal(train[0]["img0"], plain_train[0]["img0"])
    assert torch.equal(val[0]["img0"], plain_val[0]["img0"])
    assert torch.equal(train[1]["gt"], train[1]["gt"])  # deterministic per index
    with pytest.raises(UserError, match="render_scale"):
        config_from_dict({"data": {"render_scale": 0.5}})
    with pytest.raises(UserError, match="augment"):
        config_from_dict({"data": {"augment": "heavy"}})


@pytest.mark.parametrize("task", ["stereo", "flow"])
def test_street_probability_reaches_the_training_scenes_only(task: str) -> None:
    data = {"train": f"synthetic-{task}", "val": f"synthetic-{task}", "train_size": 2,
            "val_size": 1, "height": 32, "width": 48}
    plain_train, plain_val = build_datasets(config_from_dict({"task": task, "data": data}))
    train, val = build_datasets(config_from_dict(
        {"task": task, "data": {**data, "street_probability": 1.0}}))
    assert train.dataset.config.street_probability == 1.0
    assert not torch.equal(train[0]["img0"], plain_train[0]["img0"])
    assert torch.equal(val[0]["img0"], plain_val[0]["img0"])
    with pytest.raises(UserError, match="street_probability"):
        config_from_dict({"data": {"street_probability": 1.5}})


def test_real_scenes_mix_into_training_and_validate_on_the_held_out_ones(tmp_path) -> None:
    root = write_real_scenes(tmp_path)
    cfg = config_from_dict({"data": {"train_size": 8, "height": 32, "width": 64,
                                     "real_scenes": str(root), "real_fraction": 0.5,
                                     "real_holdout": ["s1"], "val": "real-scenes"}})
    train, val = build_datasets(cfg)
    samples = [train[i] for i in range(8)]
    assert all(s["gt"].shape == (2, 32, 64, 2) for s in samples)
    # odd indices are real crops of a fronto-parallel scene: one disparity over the crop
    # (a training scene's 2 or 4 px times the augmentation's scale); even ones are synthetic
    for i, sample in enumerate(samples):
        known = sample["gt"][0, ..., 0][sample["valid"][0]]
        assert bool(known.max() - known.min() < 1e-3) == (i % 2 == 1), i
    assert len(val) == 1 and torch.all(val[0]["gt"][0, ..., 0] == -3.0)
    assert val[0]["img0"].shape == (3, 64, 96)


def test_real_scenes_train_and_validate_a_flow_model(tmp_path) -> None:
    root = write_real_scenes(tmp_path)
    cfg = config_from_dict({"task": "flow",
                            "data": {"train": "synthetic-flow", "train_size": 8, "height": 32,
                                     "width": 64, "real_scenes": str(root), "real_fraction": 0.5,
                                     "real_holdout": ["s1"], "val": "real-scenes"}})
    train, val = build_datasets(cfg)
    samples = [train[i] for i in range(8)]
    assert all(s["gt"].shape == (2, 32, 64, 2) for s in samples)
    for i in (1, 3, 5, 7):  # the real crops: motion along one axis only
        known = samples[i]["gt"][0][samples[i]["valid"][0]]
        assert ((known[:, 0] == 0) | (known[:, 1] == 0)).all(), i
    assert len(val) == 1 and torch.all(val[0]["gt"][0][val[0]["valid"][0]]
                                       == torch.tensor([-3.0, 0.0]))


def test_real_scenes_alone_and_their_mistakes(tmp_path) -> None:
    root = write_real_scenes(tmp_path)
    cfg = config_from_dict({"data": {"train": "real-scenes", "train_size": 4, "height": 32,
                                     "width": 64, "real_scenes": str(root), "val_size": 0}})
    train, val = build_datasets(cfg)
    assert len(train) == 4 and val is None and train[0]["valid"].shape == (2, 32, 64)
    with pytest.raises(UserError, match=r"real-scenes training needs data\.real_scenes"):
        build_datasets(config_from_dict({"data": {"train": "real-scenes", "val_size": 0}}))
    with pytest.raises(UserError, match=r"validates on data\.real_holdout"):
        build_datasets(config_from_dict({"data": {"val": "real-scenes", "height": 32,
                                                  "width": 64}}))
    with pytest.raises(UserError, match="no scene named nope"):
        build_datasets(config_from_dict({"data": {"real_scenes": str(root), "height": 32,
                                                  "width": 64, "real_holdout": ["nope"]}}))
