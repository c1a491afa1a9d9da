"""``crossview.geometry.confidence``: the consistency confidence against its formula and on
fields whose consistency is known."""

from __future__ import annotations

import math

import pytest
import torch

from crossview.geometry.confidence import attention_peak, consistency_confidence, field_confidence


def test_formula() -> None:
    error = torch.tensor([0.0, 0.5, 2.0, 100.0])
    expected = [1.0, math.exp(-0.5), math.exp(-2.0), math.exp(-100.0)]
    assert consistency_confidence(error).tolist() == pytest.approx(expected)
    assert consistency_confidence(error, 2.0).tolist() == pytest.approx(
        [math.exp(-e / 2) for e in (0.0, 0.5, 2.0, 100.0)])
    with pytest.raises(ValueError, match="scale"):
        consistency_confidence(error, 0.0)


def test_a_consistent_shift_is_confident_inside_and_not_where_it_leaves_the_image() -> None:
    # left view matches 3 px to the left, right view 3 px to the right: consistent everywhere
    # the match stays in the image (x >= 3 on the left, x <= W - 4 on the right)
    field = torch.zeros(2, 4, 10, 2)
    field[0, ..., 0], field[1, ..., 0] = -3.0, 3.0
    confidence = field_confidence(field)
    assert confidence.shape == (2, 4, 10)
    assert torch.allclose(confidence[0, :, 3:], torch.ones(4, 7))
    assert torch.allclose(confidence[0, :, :3], torch.full((4, 3), math.exp(-3.0)))
    assert torch.allclose(confidence[1, :, :7], torch.ones(4, 7))


def test_an_inconsistent_pixel_is_less_confident() -> None:
    field = torch.zeros(2, 3, 8, 2)
    field[0, ..., 0], field[1, ..., 0] = -2.0, 2.0
    field[0, 1, 5, 0] = -4.0  # lands on (1, 1), whose right-view field says +2: error 2
    confidence = field_confidence(field)
    assert confidence[0, 1, 5] == pytest.approx(math.exp(-2.0))
    assert (confidence[0, 1, 5] < confidence[0, 1, 4]) and (confidence >= 0).all()
    assert (confidence <= 1).all()


def test_attention_peak_by_hand() -> None:
    one_hot, uniform = [0.0, 1.0, 0.0, 0.0], [0.25] * 4
    half = [0.5, 0.5, 0.0, 0.0]  # max 0.5: (0.5 - 0.25) / 0.75 = 1/3
    attn = torch.tensor([[one_hot, one_hot], [uniform, uniform], [half, one_hot]])
    assert attention_peak(attn).tolist() == pytest.approx([1.0, 0.0, (1 / 3 + 1) / 2])
    with pytest.raises(ValueError, match="attn"):
        attention_peak(torch.ones(4))


def test_field_confidence_with_a_peak_multiplies_by_one_minus_it() -> None:
    field = torch.zeros(2, 3, 8, 2)
    peak = torch.rand(2, 3, 8, generator=torch.Generator().manual_seed(0))
    torch.testing.assert_close(field_confidence(field, peak), 1 - peak)
