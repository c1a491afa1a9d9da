"""The MatchStereo / MatchFlow recipe's validation: the reference view, scored by the registry's
metrics through ``crossview.eval.evaluate``."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
from train_standin import StandInModel, StandInStereo

from crossview.eval import evaluate
from crossview.train.config import config_from_dict
from crossview.train.recipe import ValidationView
from crossview.train.recipes import get_recipe


def _sample(views: int) -> dict[str, torch.Tensor]:
    gt = torch.zeros(views, 2, 2, 2)
    gt[..., 0] = -4.0  # disparity 4 in the reference view
    valid = torch.tensor([[True, True], [True, False]]).expand(views, 2, 2)
    return {"img0": torch.zeros(3, 2, 2), "img1": torch.zeros(3, 2, 2), "gt": gt[0] if views == 1
            else gt, "valid": valid[0] if views == 1 else valid}


@pytest.mark.parametrize("views", [1, 2])
def test_stereo_validation_is_disparity_epe_and_bad2_of_the_reference_view(views: int) -> None:
    recipe, cfg = get_recipe("stereo"), config_from_dict({})
    sample = recipe.validation_sample(_sample(views))
    prediction = np.full((2, 2), 4.0)
    prediction[0, 0], prediction[0, 1], prediction[1, 0] = 7.0, 5.0, 0.0  # errors 3, 1, 4
    result = evaluate([sample], lambda s: prediction, recipe.metrics(cfg))
    assert result.mean() == {"epe": 8.0 / 3, "bad2": 200.0 / 3}


def test_flow_validation_is_the_end_point_error() -> None:
    recipe, cfg = get_recipe("flow"), config_from_dict({"task": "flow"})
    sample = recipe.validation_sample(_sample(2))
    prediction = np.asarray(sample["flow"]).copy()
    prediction[0, 0] += [3.0, 4.0]  # error 5 at one of three valid pixels
    result = evaluate([sample], lambda s: prediction, recipe.metrics(cfg))
    assert result.mean() == {"epe": 5.0 / 3}


def test_the_predictor_runs_the_reference_field_and_a_diverged_model_scores_nan() -> None:
    recipe, cfg = get_recipe("stereo"), config_from_dict({})
    torch.manual_seed(0)
    model, samples = StandInModel().eval(), StandInStereo(2)
    data = ValidationView(samples, recipe)
    with torch.no_grad():
        found = evaluate(data, recipe.predictor(model, cfg, torch.device("cpu")),
                         recipe.metrics(cfg)).mean()
        batch = [torch.stack([samples[i][key] for i in range(2)]) for key in ("img0", "img1")]
        field = model.forward_fields(*batch)["field"][:2]  # reference views first
    disparity = (-field[..., 0]).clamp(min=0)
    truth = torch.stack([-samples[i]["gt"][..., 0] for i in range(2)])
    assert found["epe"] == pytest.approx(float((disparity - truth).abs().mean()), rel=1e-5)
    with torch.no_grad():
        for p in model.parameters():
            p.fill_(math.nan)
        diverged = evaluate(data, recipe.predictor(model, cfg, torch.device("cpu")),
                            recipe.metrics(cfg)).mean()
    assert math.isnan(diverged["epe"]) and math.isnan(diverged["bad2"])
