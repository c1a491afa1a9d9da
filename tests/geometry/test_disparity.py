"""The disparity sign rule: left view -x, right view x, clipped at 0; tensors and numpy. The
right view's disparity from the left's by forward warping."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from crossview.geometry.disparity import field_to_disparity, right_view_disparity

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


def _right_view_naive(disparity: np.ndarray, valid: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    h, w = disparity.shape
    best = np.full((h, w), -np.inf)
    for y in range(h):
        for x in range(w):
            if not valid[y, x]:
                continue
            d = disparity[y, x]
            for target in {int(np.floor(x - d)), int(np.ceil(x - d))}:
                if 0 <= target < w:
                    best[y, target] = max(best[y, target], d)
    known = np.isfinite(best)
    return np.where(known, best, 0.0), known


@pytest.mark.parametrize("seed", range(4))
def test_right_view_disparity_equals_the_splat_pixel_by_pixel(seed: int) -> None:
    rng = np.random.default_rng(seed)
    disparity = rng.uniform(0, 9, (5, 17)).astype(np.float32)
    valid = rng.random((5, 17)) < 0.8
    right, known = right_view_disparity(disparity, valid)
    expected, expected_known = _right_view_naive(disparity, valid)
    np.testing.assert_array_equal(known, expected_known)
    np.testing.assert_allclose(right, expected, rtol=0, atol=0)


def test_right_view_disparity_round_trips_a_fronto_parallel_plane() -> None:
    """A constant disparity d: the right view sees the same d, on all but its last d columns
    (seen by no left pixel)."""
    disparity = np.full((3, 20), 4.0, np.float32)
    right, known = right_view_disparity(disparity, np.ones_like(disparity, bool))
    assert known[:, :16].all() and not known[:, 16:].any()
    np.testing.assert_array_equal(right[:, :16], 4.0)


def test_right_view_disparity_keeps_the_nearest_surface() -> None:
    """Two left pixels land on one right pixel: the larger disparity (in front) wins."""
    disparity = np.array([[0.0, 0.0, 0.0, 3.0, 0.0]], np.float32)
    right, _ = right_view_disparity(disparity, np.ones_like(disparity, bool))
    assert right[0, 0] == 3.0


def test_right_view_disparity_refuses_mismatched_shapes() -> None:
    with pytest.raises(ValueError, match="disparity and valid must both be"):
        right_view_disparity(np.zeros((2, 3)), np.zeros((3, 2), bool))
