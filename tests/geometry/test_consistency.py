"""Left-right / forward-backward consistency against hand-built fields."""

from __future__ import annotations

import pytest
import torch

from crossview.geometry.consistency import (
    consistency_error,
    noc_mask,
    other_view,
    warp_other_view,
)


def _stereo_pair(disp: float, h: int = 4, w: int = 10) -> torch.Tensor:
    field = torch.zeros(2, h, w, 2)
    field[0, ..., 0], field[1, ..., 0] = -disp, disp
    return field


def test_other_view_swaps_halves() -> None:
    x = torch.arange(4).view(4, 1)
    assert other_view(x).flatten().tolist() == [2, 3, 0, 1]
    with pytest.raises(ValueError, match="both views"):
        other_view(torch.zeros(3, 2))


def test_constant_disparity_is_consistent_inside_the_view() -> None:
    mask = noc_mask(_stereo_pair(3.0), threshold=1.0)
    # left pixels x < 3 look outside the right image (zeros there), as do right pixels x > 6
    assert mask[0, :, 3:].all() and not mask[0, :, :3].any()
    assert mask[1, :, :7].all() and not mask[1, :, 7:].any()


def test_warp_is_bilinear_with_pixel_centres_at_integers() -> None:
    field = torch.zeros(2, 1, 5, 2)
    field[1, 0, :, 0] = torch.tensor([0.0, 10.0, 20.0, 30.0, 40.0])
    field[0, 0, :, 0] = 1.25  # look 1.25 px to the right
    warped, inside = warp_other_view(field)
    torch.testing.assert_close(warped[0, 0, :4, 0], torch.tensor([12.5, 22.5, 32.5, 0.75 * 40]))
    assert inside[0, 0].tolist() == [True, True, True, False, False]


def test_error_detects_inconsistency() -> None:
    field = _stereo_pair(2.0)
    field[1, 1, 4, 0] = 5.0  # the right view disagrees at one pixel
    error, inside = consistency_error(field)
    assert error[0, 1, 6] == pytest.approx(3.0)
    assert error[0, 0, 6] == 0
    # left pixels x < 2 look outside the right image, where its field reads as 0
    assert not inside[0, :, :2].any() and inside[0, :, 2:].all()
    torch.testing.assert_close(error[0, :, :2], torch.full((4, 2), 2.0))


def test_flow_vertical_component_counts() -> None:
    field = torch.zeros(2, 6, 6, 2)
    field[0, ..., 1], field[1, ..., 1] = 1.0, -1.0
    assert noc_mask(field, 0.5)[0, :5].all()
    field[1, ..., 1] = 1.0
    assert not noc_mask(field, 0.5)[0, :5].any()


def test_rejects_bad_shapes() -> None:
    with pytest.raises(ValueError, match=r"field\.shape"):
        warp_other_view(torch.zeros(2, 4, 4, 3))



def test_an_error_exactly_at_the_threshold_stays_outside_the_mask() -> None:
    # Left pixel 0 points 3 px right, onto right pixel 3, whose field points back 5 px: the error is
    # exactly 2, the decoder's threshold. The published grid formula reads pixel 3 exactly; the
    # other order of operations reads 3.0000000000000004, blends 4e-16 of pixel 4's 1000 and
    # lets the pixel into the mask (an integer-valued 1/32 field hits such ties often).
    field = torch.zeros(2, 2, 6, 2, dtype=torch.float64)
    field[0, 0, 0, 0] = 3.0
    field[1, 0, 3, 0], field[1, 0, 4, 0] = -5.0, 1000.0
    error, inside = consistency_error(field)
    assert inside[0, 0, 0] and error[0, 0, 0].item() == 2.0
    assert not noc_mask(field, 2.0)[0, 0, 0]
