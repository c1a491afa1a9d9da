from __future__ import annotations

import pytest
import torch

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
