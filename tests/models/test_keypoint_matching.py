"""The keypoint-matching contract and its inference: TransforMatcher keeps the contract, other
networks do not; dense flows read the displacement in the grid frame."""

from __future__ import annotations

import torch

from crossview.models.keypoints.contract import is_keypoint_matcher
from crossview.models.keypoints.coordinates import grid_centres
from crossview.models.keypoints.inference import dense_flow
from crossview.models.matchstereo import MatchStereo, MatchStereoConfig
from crossview.models.transformatcher.model import TransforMatcher


def test_transformatcher_keeps_the_contract_and_a_stereo_network_does_not() -> None:
    assert is_keypoint_matcher(TransforMatcher(grid=3))
    assert not is_keypoint_matcher(MatchStereo(MatchStereoConfig()))


def test_both_ways_is_the_forward_coords_and_the_swapped_pair() -> None:
    torch.manual_seed(0)
    model = TransforMatcher(grid=3).eval()
    src, tgt = torch.rand(1, 3, 48, 48) * 255, torch.rand(1, 3, 48, 48) * 255
    with torch.no_grad():
        forward, backward = model.coords_both_ways(src, tgt)
        torch.testing.assert_close(forward, model(src, tgt)["coords"], atol=1e-5, rtol=0)
        torch.testing.assert_close(backward, model(tgt, src)["coords"], atol=1e-4, rtol=0)


def test_identity_coords_give_zero_flow_and_scaled_targets() -> None:
    coords = grid_centres(6, 6)[None]
    torch.testing.assert_close(dense_flow(coords, (12, 18), (12, 18)), torch.zeros(2, 12, 18),
                               atol=1e-5, rtol=0)
    # Into a target twice as large, pixel x maps to 2x + 0.5 (pixel centres at integers).
    flow = dense_flow(coords, (12, 18), (24, 36))
    xs = torch.arange(18.0)
    torch.testing.assert_close(flow[0, 5], 2 * xs + 0.5 - xs, atol=1e-4, rtol=0)
    # In a shifted grid frame identity coords are still the identity.
    torch.testing.assert_close(dense_flow(coords, (12, 18), (12, 18), 0.1),
                               torch.zeros(2, 12, 18), atol=1e-5, rtol=0)


def test_dense_flow_reads_the_displacement_at_the_grid_frame_position() -> None:
    # Displacement growing along x in the grid frame: pixel x of a 24 px image sits at grid
    # position u + shift, and its flow is the displacement interpolated there.
    centres = grid_centres(6, 6)
    coords = centres.clone()[None]
    coords[..., 0] += 0.1 * centres[..., 0]
    shift = 2 * 1.5 / 24
    flow = dense_flow(coords, (24, 24), (24, 24), shift)
    u = (2 * torch.arange(24.0) + 1) / 24 - 1  # normalised pixel centres
    inner = (u + shift > centres[0, 0, 0]) & (u + shift < centres[0, -1, 0])
    expected = 0.1 * (u + shift) * 24 / 2  # normalised displacement -> pixels
    torch.testing.assert_close(flow[0, 3][inner], expected[inner], atol=1e-4, rtol=0)
