from __future__ import annotations

import pytest
import torch

from crossview.attention.camera import prope_attention
from crossview.geometry.cameras import random_se3
from crossview.nn.camera_attention import CameraAttention

F64 = torch.float64


def cameras(seed: int, views: int):
    gen = torch.Generator().manual_seed(seed)
    viewmats = random_se3(1, views, generator=gen, dtype=F64)
    Ks = torch.tensor([[30.0, 0, 16], [0, 28.0, 15], [0, 0, 1]], dtype=F64).repeat(1, views, 1, 1)
    return viewmats, Ks


@pytest.mark.parametrize("encoding", ["prope", "gta", "cape", "rope"])
def test_encodings_add_no_parameters(encoding: str) -> None:
    plain = CameraAttention(32, 2, "none")
    encoded = CameraAttention(32, 2, encoding)
    assert [p.shape for p in encoded.parameters()] == [p.shape for p in plain.parameters()]
    assert list(encoded.buffers()) == []


def test_module_equals_projections_around_prope_attention() -> None:
    torch.manual_seed(0)
    attn = CameraAttention(32, 2).double()
    viewmats, Ks = cameras(1, 2)
    x = torch.randn(1, 2 * 9, 32, dtype=F64)
    t = attn.transforms(viewmats, Ks, image_size=(30, 32), patch_grid=(3, 3))
    q = attn.to_q(x).reshape(1, 18, 2, 16).transpose(1, 2)
    k, v = (p.reshape(1, 18, 2, 16).transpose(1, 2) for p in attn.to_kv(x).chunk(2, dim=-1))
    expected = prope_attention(q, k, v, viewmats=viewmats, Ks=Ks, image_size=(30, 32),
                               patch_grid=(3, 3))
    expected = attn.proj(expected.transpose(1, 2).reshape(1, 18, 32))
    torch.testing.assert_close(attn(x, t), expected, atol=1e-12, rtol=1e-12)


def test_cross_attention_between_camera_sets() -> None:
    torch.manual_seed(1)
    attn = CameraAttention(16, 2, "gta").double()
    target, _ = cameras(2, 1)
    source, _ = cameras(3, 3)
    x, context = torch.randn(1, 4, 16, dtype=F64), torch.randn(1, 12, 16, dtype=F64)
    out = attn(x, attn.transforms(target, patch_grid=(2, 2)), context,
               attn.transforms(source, patch_grid=(2, 2)))
    assert out.shape == (1, 4, 16)
    with pytest.raises(ValueError, match="context_transforms"):
        attn(x, attn.transforms(target, patch_grid=(2, 2)), context)


def test_bad_sizes_raise() -> None:
    with pytest.raises(ValueError, match="head_dim=6 does not fit"):
        CameraAttention(12, 2, "prope")
    with pytest.raises(ValueError, match="multiple of heads"):
        CameraAttention(30, 4)
    attn = CameraAttention(16, 2, "gta")
    other = CameraAttention(16, 2, "prope")
    t = other.transforms(torch.eye(4).expand(1, 1, 4, 4), patch_grid=(2, 2))
    with pytest.raises(ValueError, match="'prope'"):
        attn(torch.randn(1, 4, 16), t)
