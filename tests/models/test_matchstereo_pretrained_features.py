"""The hybrid encoder: adapted frozen EfficientNet-Lite0 features on every MatchStereo scale."""

from __future__ import annotations

import dataclasses

import pytest
import torch

from crossview.models.matchstereo.config import MatchStereoConfig
from crossview.models.matchstereo.model import MatchStereo
from crossview.models.matchstereo.pretrained_features import LITE0_TAPS, PretrainedFeatures
from crossview.nn.efficientnet_lite import EfficientNetLite0
from crossview.train.grow import grow_into

SMALL = MatchStereoConfig(dims=(8, 8, 16, 16), encoder_depths=(1, 1, 1, 1),
                          decoder_layers=(1, 1, 1, 1), radii=(1, 1, 1, 1), heads=2,
                          encoder_head=0)
HYBRID = dataclasses.replace(SMALL, pretrained_features="efficientnet-lite0")


def _images() -> tuple[torch.Tensor, torch.Tensor]:
    g = torch.Generator().manual_seed(0)
    return torch.rand(2, 1, 3, 192, 192, generator=g).mul(255).unbind(0)


class TestPretrainedFeatures:
    def test_shapes_and_zero_start(self) -> None:
        feats = PretrainedFeatures((8, 8, 16, 16))(torch.rand(2, 3, 96, 128) * 2 - 1)
        assert [tuple(f.shape) for f in feats] == [(2, 24, 32, 8), (2, 12, 16, 8),
                                                   (2, 6, 8, 16), (2, 3, 4, 16)]
        assert all(bool((f == 0).all()) for f in feats)

    def test_unknown_backbone(self) -> None:
        with pytest.raises(ValueError, match="pretrained_features"):
            PretrainedFeatures((8, 8, 16, 16), "resnet-7")

    def test_frozen_backbone_is_neither_trained_nor_saved(self) -> None:
        module = PretrainedFeatures((8, 8, 16, 16)).train()
        assert all(name.startswith("adapters.") for name, _ in module.named_parameters())
        assert all(key.startswith("adapters.") for key in module.state_dict())
        assert not module.backbone.training and module.adapters.training

    def test_folded_taps_equal_the_pretrained_network(self) -> None:
        # The adapters' inputs are EfficientNet-Lite0's block outputs at 1/4 .. 1/32 (BatchNorms
        # folded into the convolutions: equal up to float32 rounding).
        net = EfficientNetLite0.pretrained()
        module = PretrainedFeatures((8, 8, 16, 16))
        taps_seen: list[torch.Tensor] = []
        for adapter in module.adapters:
            adapter[0].register_forward_pre_hook(lambda _m, args: taps_seen.append(args[0]))
        images = torch.rand(1, 3, 64, 96) * 255
        module(images / 127.5 - 1)
        with torch.no_grad():
            x, expected = net._stem(images), []
            for index, block in enumerate(net._blocks):
                x = block(x)
                if index in LITE0_TAPS:
                    expected.append(x.permute(0, 2, 3, 1))
        for seen, ref in zip(taps_seen, expected, strict=True):
            torch.testing.assert_close(seen, ref, atol=2e-4, rtol=1e-4)

    def test_gradients_reach_the_adapters_only(self) -> None:
        module = PretrainedFeatures((8, 8, 16, 16))
        with torch.no_grad():
            for adapter in module.adapters:
                adapter[-1].weight.normal_()
        sum(f.square().sum() for f in module(torch.rand(1, 3, 64, 64) * 2 - 1)).backward()
        assert all(p.grad is not None and p.grad.abs().sum() > 0 for p in module.parameters())


@pytest.mark.parametrize("task", ["stereo", "flow"])
def test_a_grown_hybrid_computes_the_plain_networks_fields(task: str) -> None:
    torch.manual_seed(0)
    plain = MatchStereo(SMALL, task=task).eval()
    with torch.no_grad():
        for p in plain.parameters():
            p.add_(0.05 * torch.randn_like(p))
    hybrid = MatchStereo(HYBRID, task=task).eval()
    grow_into(hybrid, plain.state_dict())
    img0, img1 = _images()
    with torch.no_grad():
        expected = plain.forward_fields(img0, img1, task=task)["field"]
        actual = hybrid.forward_fields(img0, img1, task=task)["field"]
    assert torch.equal(actual, expected)


def test_hybrid_state_dict_round_trip() -> None:
    torch.manual_seed(1)
    source = MatchStereo(HYBRID).eval()
    with torch.no_grad():
        for p in source.parameters():
            p.add_(0.05 * torch.randn_like(p))
    target = MatchStereo(HYBRID).eval()
    target.load_state_dict(source.state_dict(), strict=True)
    img0, img1 = _images()
    with torch.no_grad():
        assert torch.equal(target(img0, img1)["field"], source(img0, img1)["field"])
    assert not any("backbone" in key for key in source.state_dict())


def test_published_variants_have_no_hybrid_keys() -> None:
    assert not any(key.startswith("feature_adapter") for key in MatchStereo().state_dict())
