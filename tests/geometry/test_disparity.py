"""The disparity sign rule: left view -x, right view x, clipped at 0; tensors and numpy."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from crossview.geometry.disparity import field_to_disparity

FIELD = [[[-3.0, 1.0], [2.0, -5.0], [0.0, 0.0]]]  # [B=1, W=3, 2]: x, y per pixel


@pytest.mark.parametrize(("view", "expected"), [("left", [[3.0, 0.0, 0.0]]),
                                                ("right", [[0.0, 2.0, 0.0]])])
@pytest.mark.parametrize("kind", [torch.tensor, np.array])
def test_the_sign_rule_per_view(view: str, expected: list, kind) -> None:
    disparity = field_to_disparity(kind(FIELD), view)
    assert type(disparity) is type(kind(FIELD))
    np.testing.assert_array_equal(np.asarray(disparity), np.asarray(expected))


def test_the_y_component_is_ignored_and_the_shape_kept() -> None:
    field = torch.randn(2, 5, 7, 2)
    moved = field.clone()
    moved[..., 1] += 10
    assert field_to_disparity(field).shape == (2, 5, 7)
    assert torch.equal(field_to_disparity(field), field_to_disparity(moved))


def test_an_unknown_view_is_refused() -> None:
    with pytest.raises(ValueError, match="view must be 'left' or 'right', got 'up'"):
        field_to_disparity(torch.zeros(1, 1, 1, 2), "up")

