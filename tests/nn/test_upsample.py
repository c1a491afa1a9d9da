"""Convex upsampling against an explicit per-pixel formula; UpConv / UpMask shapes."""

from __future__ import annotations

import pytest
import torch

from crossview.nn.upsample import UpConv, UpMask, convex_upsample


def naive_convex(field: torch.Tensor, mask: torch.Tensor, f: int) -> torch.Tensor:
    n, h, w, d = field.shape
    out = torch.zeros(n, f * h, f * w, d, dtype=field.dtype)
    logits = mask.view(n, 9, f, f, h, w)
    for b in range(n):
        for y in range(h):
            for x in range(w):
                for i in range(f):
                    for j in range(f):
                        weights = logits[b, :, i, j, y, x].softmax(0)
                        total = torch.zeros(d, dtype=field.dtype)
                        for k in range(9):
                            yy, xx = y + k // 3 - 1, x + k % 3 - 1
                            if 0 <= yy < h and 0 <= xx < w:
                                total += weights[k] * f * field[b, yy, xx]
                        out[b, f * y + i, f * x + j] = total
    return out


@pytest.mark.parametrize("factor", [2, 4])
def test_matches_naive(factor: int) -> None:
    torch.manual_seed(0)
    field = torch.randn(2, 3, 4, 2, dtype=torch.float64)
    mask = torch.randn(2, 9 * factor * factor, 3, 4, dtype=torch.float64)
    torch.testing.assert_close(convex_upsample(field, mask, factor),
                               naive_convex(field, mask, factor))


def test_constant_field_interior_scales_by_factor() -> None:
    field = torch.full((1, 5, 5, 2), 1.5)
    out = convex_upsample(field, torch.randn(1, 36, 5, 5), 2)
    torch.testing.assert_close(out[:, 2:-2, 2:-2], torch.full_like(out[:, 2:-2, 2:-2], 3.0))


def test_gradcheck() -> None:
    field = torch.randn(1, 3, 3, 2, dtype=torch.float64, requires_grad=True)
    mask = torch.randn(1, 36, 3, 3, dtype=torch.float64, requires_grad=True)
    assert torch.autograd.gradcheck(lambda a, b: convex_upsample(a, b, 2), (field, mask),
                                    fast_mode=True)


def test_wrong_mask_shape() -> None:
    with pytest.raises(ValueError, match="mask"):
        convex_upsample(torch.zeros(1, 3, 3, 2), torch.zeros(1, 35, 3, 3), 2)


def test_upconv_and_mask_shapes() -> None:
    up = UpConv(16, 8)
    out = up(torch.randn(2, 4, 6, 16), torch.randn(2, 8, 12, 8))
    assert out.shape == (2, 8, 12, 8)
    assert UpMask(8, 16, 4)(torch.randn(2, 4, 6, 8)).shape == (2, 144, 4, 6)
