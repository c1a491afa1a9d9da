"""ConvFormer: stage shapes, the unused checkpoint parameters, a block against its formula."""

from __future__ import annotations

import torch
import torch.nn.functional as F

from crossview.nn.encoder import ConvFormer, MetaFormerBlock
from crossview.nn.norms import ChannelLayerNorm


def test_stage_shapes_channel_last() -> None:
    encoder = ConvFormer((8, 16, 24, 32), (1, 1, 2, 1), num_classes=0)
    features = encoder(torch.randn(2, 3, 64, 96))
    assert [tuple(f.shape) for f in features] == [
        (2, 16, 24, 8), (2, 8, 12, 16), (2, 4, 6, 24), (2, 2, 3, 32)]


def test_unused_parameters_do_not_change_output() -> None:
    torch.manual_seed(0)
    encoder = ConvFormer((8, 16, 24, 32), (1, 1, 1, 1), num_classes=10).eval()
    x = torch.randn(1, 3, 64, 64)
    before = encoder(x)
    with torch.no_grad():
        for name, param in encoder.named_parameters():
            if "res_scale" in name or name.startswith("head."):
                param.mul_(-3.0).add_(1.0)
    for a, b in zip(before, encoder(x), strict=True):
        torch.testing.assert_close(a, b)
    assert "stages.2.0.res_scale1.scale" in encoder.state_dict()
    assert "stages.1.0.res_scale1.scale" not in encoder.state_dict()


def test_block_matches_formula() -> None:
    torch.manual_seed(0)
    block = MetaFormerBlock(4).double()
    for p in block.parameters():
        torch.nn.init.normal_(p)
    x = torch.randn(1, 3, 5, 4, dtype=torch.float64)
    mixer = block.token_mixer
    h = F.layer_norm(x, (4,), block.norm1.weight, None, 1e-6)
    h = F.gelu(h @ mixer.pwconv1.weight.t())
    h = F.conv2d(h.permute(0, 3, 1, 2), mixer.dwconv.weight, padding=1, groups=8)
    y = x + h.permute(0, 2, 3, 1) @ mixer.pwconv2.weight.t()
    h = F.layer_norm(y, (4,), block.norm2.weight, None, 1e-6)
    y = y + F.gelu(h @ block.mlp.fc1.weight.t()) @ block.mlp.fc2.weight.t()
    torch.testing.assert_close(block(x), y)


def test_layer_norm_has_no_bias() -> None:
    norm = ChannelLayerNorm(6, eps=1e-6)
    assert [n for n, _ in norm.named_parameters()] == ["weight"]
    x = torch.randn(3, 6)
    torch.testing.assert_close(norm(x), F.layer_norm(x, (6,), eps=1e-6))
