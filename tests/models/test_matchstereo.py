"""MatchStereo structure: published state-dict layout, config switches, outputs, gradients."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch

from crossview.models.matchstereo import VARIANTS, MatchStereo, MatchStereoConfig
from small_networks import SMALL

SHAPES = Path(__file__).resolve().parents[3] / "shared" / "golden" / \
    "official_state_dict_shapes.json"


@pytest.mark.skipif(not SHAPES.exists(), reason="golden shapes not available")
@pytest.mark.parametrize("variant", ["tiny", "small", "base"])
def test_state_dict_matches_published_layout(variant: str) -> None:
    expected = json.loads(SHAPES.read_text())[variant]
    with torch.device("meta"):
        model = MatchStereo(VARIANTS[variant])
    actual = {k: list(v.shape) for k, v in model.state_dict().items()}
    assert sorted(set(expected) ^ set(actual)) == []
    assert {k: v for k, v in actual.items() if expected[k] != v} == {}


def test_field_scale_initialised_at_0_1() -> None:
    model = MatchStereo(SMALL)
    scales = [p for n, p in model.named_parameters() if n.endswith("field_scale")]
    assert len(scales) == 4 and all(torch.equal(s, torch.full((1, 1, 1, 2), 0.1)) for s in scales)


@pytest.mark.parametrize("switch", ["attn_to_proj", "gating", "noc_mask_embedding"])
def test_switches_change_the_layer(switch: str) -> None:
    on = MatchStereo(SMALL).state_dict()
    off_config = MatchStereoConfig(**{**SMALL.__dict__, switch: False})
    off = MatchStereo(off_config).state_dict()
    key = "match_attentions.0.layers.0.match_attention_"
    if switch == "attn_to_proj":
        assert on[key + "cross.proj.weight"].shape[1] == 24 + 2 * 36
        assert off[key + "cross.proj.weight"].shape[1] == 24
    elif switch == "gating":
        assert key + "cross.g.0.weight" in on and key + "cross.g.0.weight" not in off
    else:
        assert on[key + "self.q.weight"].shape[1] == off[key + "self.q.weight"].shape[1] + 1


def _images(size: tuple[int, int] = (192, 224)) -> tuple[torch.Tensor, torch.Tensor]:
    torch.manual_seed(0)
    left = torch.rand(1, 3, *size) * 255
    return left, torch.roll(left, -6, dims=3)


@pytest.mark.parametrize("task", ["stereo", "flow"])
def test_forward_fields_outputs(task: str) -> None:
    model = MatchStereo(SMALL).eval()
    with torch.no_grad():
        out = model.forward_fields(*_images(), task=task)
    assert out["field"].shape == (2, 192, 224, 2)
    assert out["init_field"].shape == (2, 6, 7, 2)
    assert out["init_cv"].shape == ((2, 7, 6, 7) if task == "stereo" else (2, 6, 7, 42))
    assert out["field_kinds"] == ["self", "cross"] + ["up", "self", "cross"] * 3
    assert len(out["fields"]) == len(out["field_kinds"])
    assert [tuple(m.shape) for m in out["noc_masks"]] == [
        (2, 6, 7), (2, 12, 14), (2, 24, 28), (2, 48, 56)]
    assert out["self_rpos"].shape == (2, 48, 56, 2)
    assert out["self_rpos_up"].shape == (2, 192, 224, 2)
    if task == "stereo":
        assert all(f[..., 1].abs().max() == 0 for f, k in zip(out["fields"], out["field_kinds"],
                                                               strict=True) if k != "up")
    else:
        assert out["field"][..., 1].abs().max() > 0


def test_init_field_skips_correlation_and_is_used() -> None:
    model = MatchStereo(SMALL).eval()
    init = torch.zeros(2, 6, 7, 2)
    init[:1, ..., 0], init[1:, ..., 0] = -1.5, 1.5
    with torch.no_grad():
        out = model.forward_fields(*_images(), init_field=init)
        plain = model.forward_fields(*_images())
    assert out["init_cv"] is None
    assert torch.equal(out["init_field"], init)
    assert not torch.allclose(out["field"], plain["field"])
    with pytest.raises(ValueError, match="init_field"):
        model.forward_fields(*_images(), init_field=torch.zeros(2, 5, 7, 2))


@pytest.mark.parametrize("task", ["stereo", "flow"])
def test_gradients_reach_every_used_parameter(task: str) -> None:
    model = MatchStereo(SMALL).train()
    out = model.forward_fields(*_images(), task=task)
    loss = out["field"].abs().mean() + sum(f.abs().mean() for f in out["fields"])
    loss = loss + out["init_cv"].mean() + out["self_rpos_up"].abs().mean()
    loss.backward()
    missing = [n for n, p in model.named_parameters() if p.grad is None or not p.grad.any()]
    # res_scale parameters are carried for checkpoints but unused by design
    assert [n for n in missing if "res_scale" not in n] == []


def test_rejects_bad_images() -> None:
    model = MatchStereo(SMALL)
    with pytest.raises(ValueError, match="multiples of 32 and at least 192"):
        model.forward_fields(torch.zeros(1, 3, 160, 192), torch.zeros(1, 3, 160, 192))
    with pytest.raises(ValueError, match="multiples of 32"):
        model.forward_fields(torch.zeros(1, 3, 200, 192), torch.zeros(1, 3, 200, 192))
    with pytest.raises(ValueError, match=r"img0\.shape"):
        model.forward_fields(torch.zeros(1, 3, 192, 192), torch.zeros(1, 3, 192, 224))
    with pytest.raises(ValueError, match="task"):
        model.forward_fields(torch.zeros(1, 3, 192, 192), torch.zeros(1, 3, 192, 192), task="x")


@pytest.mark.parametrize(("fields", "message"), [
    ({"radii": (2, 2, 1)}, r"^radii must be a list of 4 values, got \(2, 2, 1\)$"),
    ({"dims": (30, 64, 128, 160)}, r"^dims must each divide by heads=4"),
    ({"heads": 0}, r"^heads must be >= 1, got 0$"),
    ({"heads": "two"}, r"^heads must be int, got 'two'$"),
    ({"radii": (2, -1, 1, 1)}, r"^radii\[1\] must be >= 0, got -1$"),
    ({"dims": (0, 64, 128, 160)}, r"^dims\[0\] must be >= 1, got 0$"),
    ({"encoder_head": -1}, r"^encoder_head must be >= 0, got -1$"),
    ({"decoder_layers": (8, 8, 8, -2)}, r"^decoder_layers\[3\] must be >= 0, got -2$"),
    ({"field_scale_init": 0.0}, r"^field_scale_init must be > 0, got 0.0$"),
    ({"noc_threshold": float("nan")}, r"^noc_threshold must be a finite number, got nan$"),
    ({"gating": "yes"}, r"^gating must be bool, got 'yes'$"),
])
def test_config_validation_names_the_field(fields: dict, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        MatchStereoConfig(**fields)


def test_config_min_size() -> None:
    assert MatchStereoConfig().min_size == 192


@pytest.mark.parametrize("task", ["stereo", "flow"])
def test_min_shape_covers_the_initial_regression_window(task: str) -> None:
    config = MatchStereoConfig(**{**SMALL.__dict__, "radii": (1, 1, 1, 1)})
    # r = 1 everywhere allows 4 tokens (128 px) at 1/32, but the k = 5 regression needs 5
    # along the width (stereo) or along both sides (flow)
    assert config.min_size == 128
    least = config.min_shape(task)
    assert least == {"stereo": (128, 160), "flow": (160, 160)}[task]
    img0, img1 = _images(least)
    out = MatchStereo(config).eval().forward_fields(img0, img1, task=task)
    assert out["field"].shape == (2, *least, 2) and torch.isfinite(out["field"]).all()
    with pytest.raises(ValueError, match="at least"):
        MatchStereo(config).forward_fields(*_images((least[0], 128)), task=task)
