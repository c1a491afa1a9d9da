"""The colour-weighted median along depth edges (crossview.geometry.edge_weighted_median):
the band and the median against explicit loops (float32: the order of equal values and the
float32 sums included), the compiled kernel against numpy number for number, and the property
it is there for: a depth edge moved off its colour edge (a fattened foreground) is put back on
it."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from crossview.cpu_kernels import cpu_build
from crossview.geometry import edge_weighted_median as median_module
from crossview.geometry.edge_weighted_median import (
    depth_edge_band,
    edge_weighted_median,
    edge_weighted_median_flow,
    weighted_median_at,
)

needs_kernels = pytest.mark.skipif(cpu_build.unavailable_reason() is not None,
                                   reason=f"{cpu_build.unavailable_reason()}")


@pytest.mark.parametrize(("seed", "width"), [(0, 1), (1, 1), (2, 0), (3, 2), (4, 3), (5, 8)])
def test_band_is_the_neighbours_of_jumps(seed: int, width: int) -> None:
    rng = np.random.default_rng(seed)
    disparity = np.round(rng.uniform(0, 6, (7, 9))).astype(np.float32)
    jump = 2.0 if seed != 4 else 4.0  # fewer edges: a band that does not cover the map
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


def _float32_median(values: np.ndarray, weights: np.ndarray) -> np.float32:
    """The definition, one pixel: ``values``, ``weights`` float32 ``[K]`` in window order."""
    order = sorted(range(len(values)),  # by value, then place in the window, NaN last
                   key=lambda k: (bool(np.isnan(values[k])), 0.0 if np.isnan(values[k])
                                  else float(values[k]), k))
    total, reached = np.float32(0), []
    for k in order:
        total = np.float32(total + weights[k])
        reached.append(total)
    half = np.float32(0.5) * total
    return values[order[next(i for i, r in enumerate(reached) if not r < half)]]


def _window_medians(values: np.ndarray, image: np.ndarray, mask: np.ndarray, radius: int,
                    step: int, sigma: float) -> np.ndarray:
    """:func:`_float32_median` at every pixel of ``mask``: ``values [H, W, C]`` float32,
    ``image [H, W, 3]`` uint8 -> ``[H, W, C]``."""
    h, w = mask.shape
    out = values.copy()
    offsets = range(-radius, radius + 1, step)
    for y, x in zip(*np.nonzero(mask), strict=True):
        samples = [(min(max(y + dy, 0), h - 1), min(max(x + dx, 0), w - 1))
                   for dy in offsets for dx in offsets]
        colour = np.array([np.abs(image[p].astype(np.float32) - image[y, x]).sum()
                           for p in samples], np.float32)
        weights = np.exp(colour * np.float32(-1.0 / sigma))
        for c in range(values.shape[-1]):
            out[y, x, c] = _float32_median(np.array([values[p][c] for p in samples]), weights)
    return out


def _tied_maps(seed: int, h: int, w: int, channels: int) -> tuple[np.ndarray, ...]:
    """float32 values on a coarse grid (many equal values), a few NaN and negatives, a uint8
    image and a mask that reaches the borders."""
    rng = np.random.default_rng(seed)
    values = (np.round(rng.uniform(-3, 12, (h, w, channels)) * 2) / 2).astype(np.float32)
    values[rng.random((h, w, channels)) < 0.04] = np.nan
    image = rng.integers(0, 256, (h, w, 3), dtype=np.uint8)
    image[rng.random((h, w)) < 0.3] = 128  # equal colours: equal weights
    mask = rng.random((h, w)) < 0.5
    mask[0], mask[:, -1] = True, True
    return values, image, mask


@pytest.mark.parametrize(("radius", "step"), [(1, 1), (3, 2), (4, 1)])
def test_float32_median_orders_equal_values_by_place_and_sums_in_float32(
        radius: int, step: int, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(median_module, "_compiled_median", lambda: None)  # numpy
    values, image, mask = _tied_maps(radius + 10 * step, 9, 12, 1)
    out = weighted_median_at(values[..., 0], image, mask, radius, step, 20.0, chunk=5)
    expected = _window_medians(values, image, mask, radius, step, 20.0)[..., 0]
    np.testing.assert_array_equal(out, expected)


@needs_kernels
@pytest.mark.parametrize(("radius", "step", "channels"),
                         [(1, 1, 1), (3, 2, 2), (5, 2, 1), (12, 6, 1), (4, 2, 2), (6, 1, 1)])
def test_the_compiled_kernel_gives_numpys_numbers(radius: int, step: int,
                                                  channels: int) -> None:
    # (6, 1): 169 samples, past the counting ranks, sorted
    values, image, mask = _tied_maps(7 * radius + step, 37, 53, channels)
    ys, xs = np.nonzero(mask)
    kernel = median_module._compiled_median()
    assert kernel is not None  # torch is loaded here and the kernels build
    compiled = median_module._compiled_filter(kernel, values, image, ys * 53 + xs, radius, step,
                                              15.0)
    numpy = median_module._numpy_filter(values, image, ys, xs, radius, step, 15.0, 1000)
    np.testing.assert_array_equal(compiled, numpy)
    assert np.isnan(numpy).any() and not np.isnan(numpy).all()


@needs_kernels
def test_the_kernel_refuses_a_pixel_outside_the_map() -> None:
    kernel = median_module._compiled_median()
    weight_of = np.ones(median_module.COLOUR_DIFFERENCES, np.float32)
    with pytest.raises(RuntimeError, match="outside the map"):
        kernel(torch.zeros(4, 5, 1), torch.zeros(4, 5, 3, dtype=torch.uint8),
               torch.tensor([20]), 1, 1, torch.from_numpy(weight_of))


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
