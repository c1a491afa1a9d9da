"""The colour-weighted median along depth edges (crossview.geometry.edge_weighted_median):
the band and the median against explicit loops, and the property it is there for: a depth edge
moved off its colour edge (a fattened foreground) is put back on it."""

from __future__ import annotations

import numpy as np
import pytest

from crossview.geometry.edge_weighted_median import (
    depth_edge_band,
    edge_weighted_median,
    edge_weighted_median_flow,
    weighted_median_at,
)


@pytest.mark.parametrize("seed", range(4))
def test_band_is_the_neighbours_of_jumps(seed: int) -> None:
    rng = np.random.default_rng(seed)
    disparity = np.round(rng.uniform(0, 6, (7, 9))).astype(np.float32)
    jump, width = 2.0, 1
    band = depth_edge_band(disparity, jump, width)
    h, w = disparity.shape
    edge = np.zeros((h, w), bool)
    for y in range(h):
        for x in range(w):
            for dy, dx in ((0, 1), (1, 0), (0, -1), (-1, 0)):
                if 0 <= y + dy < h and 0 <= x + dx < w:
                    edge[y, x] |= abs(disparity[y, x] - disparity[y + dy, x + dx]) > jump
    for y in range(h):
        for x in range(w):
            near = edge[max(0, y - width):y + width + 1, max(0, x - width):x + width + 1]
            assert band[y, x] == near.any()


@pytest.mark.parametrize(("radius", "step"), [(1, 1), (2, 1), (3, 2)])
def test_median_is_the_weighted_median_pixel_by_pixel(radius: int, step: int) -> None:
    rng = np.random.default_rng(radius + 10 * step)
    h, w, sigma = 8, 11, 25.0
    disparity = rng.uniform(0, 40, (h, w))
    image = rng.uniform(0, 255, (h, w, 3))
    mask = rng.random((h, w)) < 0.6
    out = weighted_median_at(disparity, image, mask, radius, step, sigma, chunk=7)
    offsets = range(-radius, radius + 1, step)
    for y in range(h):
        for x in range(w):
            if not mask[y, x]:
                assert out[y, x] == disparity[y, x]
                continue
            samples = [(min(max(y + dy, 0), h - 1), min(max(x + dx, 0), w - 1))
                       for dy in offsets for dx in offsets]
            values = np.array([disparity[p] for p in samples])
            weights = np.array([np.exp(-np.abs(image[p] - image[y, x]).sum()
                                       / sigma) for p in samples])
            order = np.argsort(values, kind="stable")
            reached = np.cumsum(weights[order]) >= 0.5 * weights.sum()
            assert out[y, x] == values[order][np.argmax(reached)]


def test_fattened_foreground_goes_back_to_the_colour_edge() -> None:
    h, w, true_edge, fattened = 24, 48, 20, 2
    rng = np.random.default_rng(0)
    image = np.where(np.arange(w)[None, :, None] < true_edge, 40.0, 200.0)
    image = image + rng.uniform(-2, 2, (h, w, 3))
    disparity = np.where(np.arange(w)[None] < true_edge + fattened, 30.0, 10.0).repeat(h, 0)
    out = edge_weighted_median(disparity.astype(np.float32), image, jump=2.0, width=3,
                               radius=6, step=1, sigma_colour=20.0)
    expected = np.where(np.arange(w)[None] < true_edge, 30.0, 10.0).repeat(h, 0)
    np.testing.assert_array_equal(out, expected)


def test_map_without_edges_is_unchanged() -> None:
    rng = np.random.default_rng(1)
    disparity = rng.uniform(10, 11.5, (16, 20)).astype(np.float32)  # jumps <= 1.5 px
    image = rng.uniform(0, 255, (16, 20, 3))
    out = edge_weighted_median(disparity, image, jump=2.0, width=3, radius=4, step=1,
                               sigma_colour=20.0)
    np.testing.assert_array_equal(out, disparity)


def test_flow_components_share_the_band_of_either_motion_edge() -> None:
    rng = np.random.default_rng(2)
    h, w = 12, 16
    flow = rng.uniform(-1, 1, (h, w, 2)).astype(np.float32)
    flow[:, 8:, 1] += 10.0  # a motion edge in v only
    image = rng.uniform(100, 110, (h, w, 3))  # colours close: the neighbours weigh
    settings = {"radius": 2, "step": 1, "sigma_colour": 20.0}
    out = edge_weighted_median_flow(flow, image, jump=2.0, width=1, **settings)
    band = depth_edge_band(flow[..., 1], 2.0, 1)
    assert not depth_edge_band(flow[..., 0], 2.0, 1).any()
    for c in range(2):  # u is filtered at v's edge too
        expected = weighted_median_at(np.ascontiguousarray(flow[..., c]), image, band, **settings)
        np.testing.assert_array_equal(out[..., c], expected)
    assert not np.array_equal(out[..., 0], flow[..., 0])


def test_fattened_moving_object_goes_back_to_its_colour_edge() -> None:
    h, w, true_edge, fattened = 24, 48, 20, 2
    image = np.where(np.arange(w)[None, :, None] < true_edge, 40.0, 200.0)
    image = np.broadcast_to(image, (h, w, 3))
    inside = np.arange(w)[None] < true_edge + fattened
    flow = np.stack([np.where(inside, 6.0, -1.0), np.where(inside, -4.0, 0.5)], -1)
    flow = flow.repeat(h, 0).astype(np.float32)
    out = edge_weighted_median_flow(flow, image, jump=2.0, width=3, radius=6, step=1,
                                    sigma_colour=20.0)
    truly_inside = (np.arange(w)[None] < true_edge).repeat(h, 0)
    np.testing.assert_array_equal(out[..., 0], np.where(truly_inside, 6.0, -1.0))
    np.testing.assert_array_equal(out[..., 1], np.where(truly_inside, -4.0, 0.5))


def test_bad_arguments_are_refused() -> None:
    d, image, mask = np.zeros((4, 5)), np.zeros((4, 5, 3)), np.ones((4, 5), bool)
    with pytest.raises(ValueError, match=r"image \[H, W, 3\]"):
        weighted_median_at(d, np.zeros((4, 6, 3)), mask, 1, 1, 10.0)
    with pytest.raises(ValueError, match="step >= 1"):
        weighted_median_at(d, image, mask, 1, 0, 10.0)
    with pytest.raises(ValueError, match=r"\[H, W\]"):
        depth_edge_band(np.zeros((1, 4, 5)), 2.0, 1)
    with pytest.raises(ValueError, match=r"\[H, W, 2\]"):
        edge_weighted_median_flow(np.zeros((4, 5, 3)), image, jump=1.0, width=1, radius=1,
                                  step=1, sigma_colour=10.0)
