from __future__ import annotations

import math

import pytest
import torch
from safetensors.torch import load_file

from crossview.experiments.semantic_warps import evaluate_warps
from crossview.models.transformatcher.bundle import export_transformatcher
from crossview.models.transformatcher.model import TransforMatcher, uses_placement
from crossview.models.transformatcher.placement import FEATURES, placement_features
from crossview.train.config import config_from_dict
from crossview.train.trainer import Trainer


def test_placement_features_written_out() -> None:
    feats = placement_features(2, 3, 4, 5)
    assert feats.shape == (2 * 3 * 4 * 5, FEATURES)
    # Match (y_src=1, x_src=2, y_tgt=0, x_tgt=3) in row-major order.
    row = feats[((1 * 3 + 2) * 4 + 0) * 5 + 3]
    centres = [(2 * 1 + 1) / 2 - 1, (2 * 2 + 1) / 3 - 1, (2 * 0 + 1) / 4 - 1, (2 * 3 + 1) / 5 - 1]
    expected = []
    for c in centres:
        expected += [c, *(math.sin(k * math.pi * c / 2) for k in range(1, 5)),
                     *(math.cos(k * math.pi * c / 2) for k in range(1, 5))]
    torch.testing.assert_close(row, torch.tensor(expected))


def test_placement_starts_as_the_model_without_it_and_learns() -> None:
    torch.manual_seed(0)
    plain = TransforMatcher(grid=4, depth=1).eval()
    torch.nn.init.normal_(plain.refiner.head.weight)
    placed = TransforMatcher(grid=4, depth=1, placement=True).eval()
    placed.load_trained_state_dict(plain.head_state_dict(), grow=True)
    corr = torch.rand(1, 11, 4, 4, 4, 4)
    torch.testing.assert_close(placed.refiner(corr), plain.refiner(corr))
    placed.refiner(corr).square().sum().backward()
    assert placed.refiner.place.weight.grad.abs().sum() > 0
    # Without grow=True the missing placement keys are an error.
    with pytest.raises(ValueError, match="missing"):
        placed.load_trained_state_dict(plain.head_state_dict())


def test_placement_carries_where_a_match_is_into_its_token() -> None:
    """Without attention layers a correlation that is constant over the grid gets one score for
    every match; the placement term makes a match at the image side score differently from one
    in the middle."""
    torch.manual_seed(1)
    corr = torch.rand(1, 11, 1, 1, 1, 1).expand(1, 11, 5, 5, 5, 5).contiguous()
    for placement in (False, True):
        model = TransforMatcher(grid=5, depth=0, placement=placement).eval()
        torch.nn.init.normal_(model.refiner.head.weight)
        if placement:
            torch.nn.init.normal_(model.refiner.place.weight)
        score = model.refiner(corr)[0]
        side, middle = score[0, 0, 0, 0], score[2, 2, 2, 2]
        assert (abs(side - middle) > 1e-4) == placement


def _train(out_dir, placement: bool, init=None) -> TransforMatcher:
    cfg = config_from_dict({
        "task": "semantic", "model": {"name": "transformatcher",
                                      "overrides": {"grid": 3, "placement": placement}},
        "data": {"train": "synthetic-warps", "val": "synthetic-warps", "train_size": 4,
                 "val_size": 0},
        "recipe": {"keypoints": 8}, "optim": {"lr": 1e-3, "schedule": "constant"},
        "train": {"steps": 1, "batch_size": 1, "out_dir": str(out_dir), "seed": 3}})
    trainer = Trainer(cfg, init_weights=init, progress=False)
    trainer.run()
    return trainer.model


def test_train_grows_placement_from_plain_weights_and_exports_it(tmp_path) -> None:
    plain = _train(tmp_path / "a", placement=False)
    path = export_transformatcher(plain, tmp_path / "plain.safetensors", {})
    assert not uses_placement(load_file(str(path)))
    placed = _train(tmp_path / "b", placement=True, init=path)
    state = placed.head_state_dict()
    assert uses_placement(state) and state["refiner.place.weight"].abs().sum() > 0
    out = export_transformatcher(placed, tmp_path / "placed.safetensors", {})
    assert uses_placement(load_file(str(out)))
    result = evaluate_warps(placed, pairs=1, keypoints=4, batch=1)
    assert 0 <= result["refined"]["pck@0.05"] <= 100
