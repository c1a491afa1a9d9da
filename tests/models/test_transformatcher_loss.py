"""TransforMatcher's losses: Eq. 12 in its dense form against the exact correspondence on the
output grid (:func:`oracle_coords`), in the image frame and in the grid frame."""

from __future__ import annotations

import torch

from crossview.data.synthetic.warp_batches import warp_batch, warp_dataset
from crossview.models.keypoints.coordinates import normalised_to_pixels, pixels_to_normalised
from crossview.models.transformatcher.loss import dense_loss, oracle_coords
from crossview.models.transformatcher.softargmax import soft_sample


def test_oracle_coords_transfer_keypoints_through_the_exact_flow() -> None:
    data = warp_dataset("heldout", 96, 2, seed=1, keypoints=16)
    b = warp_batch(data, [0, 1])
    coords = oracle_coords(b["flow"], 12)
    assert coords.shape == (2, 12, 12, 2)
    # Cell centre (x, y) = (8 i + 3.5, 8 j + 3.5) px: its target is that point plus the flow.
    x, y = 8 * 5 + 3.5, 8 * 2 + 3.5
    x0, y0 = int(x), int(y)  # halfway between four pixels: bilinear = their mean
    fx, fy = b["flow"][0, :, y0:y0 + 2, x0:x0 + 2].mean(dim=(1, 2))
    expected = pixels_to_normalised(torch.tensor([x + fx, y + fy]), 96, 96)
    torch.testing.assert_close(coords[0, 2, 5], expected, atol=1e-5, rtol=0)
    # Soft-sampled keypoints land close to their true matches (the warps are smooth).
    pred = soft_sample(coords, pixels_to_normalised(b["kp_src"], 96, 96), 0.05)
    err = (normalised_to_pixels(pred, 96, 96) - b["kp_tgt"]).norm(dim=-1)
    assert err.median() < 2.0


def test_oracle_in_the_grid_frame_and_dense_loss() -> None:
    data = warp_dataset("heldout", 96, 2, seed=1, keypoints=16)
    b = warp_batch(data, [0, 1])
    shift = 1 / 6 - 1 / 96  # TransforMatcher(grid=6).frame_shift
    coords = oracle_coords(b["flow"], 12, shift)
    # Grid-frame cell (5, 2) is centred at image pixel (8 * 5 + 3.5 - 7.5, 8 * 2 + 3.5 - 7.5).
    x, y = 8 * 5 - 4.0, 8 * 2 - 4.0
    fx, fy = b["flow"][0, :, int(y), int(x)]  # integer pixel: no interpolation
    expected = pixels_to_normalised(torch.tensor([x + fx, y + fy]), 96, 96) + shift
    torch.testing.assert_close(coords[0, 2, 5], expected, atol=1e-5, rtol=0)
    kp = pixels_to_normalised(b["kp_src"], 96, 96)
    pred = soft_sample(coords, kp + shift, 0.05) - shift
    err = (normalised_to_pixels(pred, 96, 96) - b["kp_tgt"]).norm(dim=-1)
    assert err.median() < 2.0
    # The dense loss is 0 at the exact correspondence and |offset| for a constant offset.
    assert b["valid"].shape == (2, 96, 96) and b["valid"].dtype == torch.bool
    assert dense_loss(coords, b["flow"], b["valid"], shift).item() < 1e-6
    offset = torch.tensor([0.03, -0.04])
    loss = dense_loss(coords + offset, b["flow"], b["valid"], shift)
    torch.testing.assert_close(loss, offset.norm())
    # Cells whose centre has no valid match are ignored.
    wrong = coords.clone()
    b["valid"][0, :48] = False
    wrong[0, :5] += 1.0  # cell rows 0-4 (centres above pixel 36) are all invalid now
    torch.testing.assert_close(dense_loss(wrong, b["flow"], b["valid"], shift),
                               dense_loss(coords, b["flow"], b["valid"], shift), atol=1e-6,
                               rtol=0)
