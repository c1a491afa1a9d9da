"""The census matching cost of a stereo field or a flow (crossview.geometry.census_arrays)
against the formulas written out pixel by pixel: the codes, the Hamming distance, the match on
the row clipped to the image and weighted between its two pixels (a flow's between the four
around it), the window's mean with reflected borders; a cost that moves little with the
field; and what it refuses."""

from __future__ import annotations

import cv2
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from crossview.geometry.census_arrays import census_codes, census_cost, hamming


def _window_mean(per_pixel: np.ndarray, window: int) -> np.ndarray:
    """Each pixel's mean over the ``window x window`` pixels around it, borders reflected as
    OpenCV's BORDER_REFLECT (numpy's "symmetric")."""
    h, w = per_pixel.shape
    padded = np.pad(per_pixel, window // 2, mode="symmetric")
    return np.array([[padded[y:y + window, x:x + window].mean() for x in range(w)]
                     for y in range(h)])


def _bits(a: int, b: int) -> int:
    return bin(int(a) ^ int(b)).count("1")


def _cost_by_loops(codes: list[np.ndarray], field: np.ndarray, window: int,
                   pixel_cost) -> np.ndarray:
    """Both rows' costs ``[2, H, W]``: ``pixel_cost(own code, the other row's codes, y, x,
    field[row, y, x])`` at every pixel, then :func:`_window_mean`."""
    out = []
    for row in range(2):
        own, other = codes[row], codes[1 - row]
        per_pixel = np.zeros(own.shape)
        for y, x in np.ndindex(*own.shape):
            per_pixel[y, x] = pixel_cost(own[y, x], other, y, x, field[row, y, x])
        out.append(_window_mean(per_pixel, window))
    return np.stack(out)


def _grey(image: np.ndarray) -> np.ndarray:
    return cv2.cvtColor(image, cv2.COLOR_RGB2GRAY).astype(int)


@pytest.mark.parametrize("radius", [1, 2])
def test_codes_are_the_darker_neighbours_row_by_row(radius: int) -> None:
    rng = np.random.default_rng(radius)
    image = rng.integers(0, 256, (9, 11, 3), dtype=np.uint8)
    image[2:5, 3:7] = 90  # equal neighbours set no bit
    grey = _grey(image)
    codes = census_codes(image, radius)
    assert codes.shape == (9, 11) and codes.dtype == np.uint32
    for y in range(9):
        for x in range(11):
            want, bit = 0, 0
            for dy in range(-radius, radius + 1):
                for dx in range(-radius, radius + 1):
                    if dy == dx == 0:
                        continue
                    neighbour = grey[min(max(y + dy, 0), 8), min(max(x + dx, 0), 10)]
                    want |= int(neighbour < grey[y, x]) << bit
                    bit += 1
            assert int(codes[y, x]) == want, (y, x)


@given(st.lists(st.integers(0, 2**32 - 1), min_size=2, max_size=2))
@settings(max_examples=50, deadline=None)
def test_hamming_counts_the_bits_that_differ(pair: list[int]) -> None:
    a, b = (np.array([[value]], np.uint32) for value in pair)
    assert int(hamming(a, b)[0, 0]) == bin(pair[0] ^ pair[1]).count("1")


@pytest.mark.parametrize("window", [1, 3, 5])
def test_the_cost_is_the_windows_mean_of_each_pixels_match_on_its_row(window: int) -> None:
    rng = np.random.default_rng(window)
    h, w = 10, 14
    images = [rng.integers(0, 256, (h, w, 3), dtype=np.uint8) for _ in range(2)]
    codes = [census_codes(image) for image in images]
    field = np.zeros((2, h, w, 2), np.float32)
    field[0, ..., 0] = -rng.uniform(0, 6, (h, w))  # first view: x = -disparity
    field[1, ..., 0] = rng.uniform(-1, 6, (h, w))  # some matches leave the image: clipped
    field[..., 1] = rng.uniform(-3, 3, (2, h, w))  # y is not read: the match is on the row
    cost = census_cost(codes, field, window)
    assert cost.shape == (2, h, w) and cost.dtype == np.float32

    def on_the_row(own: int, other: np.ndarray, y: int, x: int, move: np.ndarray) -> float:
        match = min(max(x + float(move[0]), 0.0), w - 1.0)
        left = int(np.floor(match))
        near, far = (_bits(own, other[y, k]) for k in (left, min(left + 1, w - 1)))
        return (1 - (match - left)) * near + (match - left) * far

    np.testing.assert_allclose(cost, _cost_by_loops(codes, field, window, on_the_row),
                               rtol=1e-6, atol=1e-5)


@pytest.mark.parametrize("window", [1, 3])
def test_a_flows_cost_weighs_the_four_codes_around_its_match(window: int) -> None:
    rng = np.random.default_rng(10 + window)
    h, w = 9, 12
    frames = [rng.integers(0, 256, (h, w, 3), dtype=np.uint8) for _ in range(2)]
    codes = [census_codes(frame) for frame in frames]
    flow = rng.uniform(-4, 4, (2, h, w, 2)).astype(np.float32)  # some matches leave: clipped
    cost = census_cost(codes, flow, window, vertical=True)

    def around(own: int, other: np.ndarray, y: int, x: int, move: np.ndarray) -> float:
        mx = min(max(x + float(move[0]), 0.0), w - 1.0)
        my = min(max(y + float(move[1]), 0.0), h - 1.0)
        x0, y0 = int(np.floor(mx)), int(np.floor(my))
        return sum(wy * wx * _bits(own, other[yy, xx])
                   for yy, wy in ((y0, 1 - (my - y0)), (min(y0 + 1, h - 1), my - y0))
                   for xx, wx in ((x0, 1 - (mx - x0)), (min(x0 + 1, w - 1), mx - x0)))

    np.testing.assert_allclose(cost, _cost_by_loops(codes, flow, window, around), rtol=1e-5,
                               atol=1e-4)
    on_rows = flow.copy()
    on_rows[..., 1] = 0  # no vertical motion: the row's cost
    np.testing.assert_allclose(census_cost(codes, on_rows, window, vertical=True),
                               census_cost(codes, on_rows, window), rtol=1e-6, atol=1e-5)


def test_a_right_match_costs_nothing_a_wrong_one_about_half_the_bits() -> None:
    rng = np.random.default_rng(7)
    left = rng.integers(0, 256, (40, 64, 3), dtype=np.uint8)
    right = np.roll(left, -4, axis=1)  # disparity 4
    codes = [census_codes(left), census_codes(right)]
    field = np.zeros((2, 40, 64, 2), np.float32)
    field[0, ..., 0], field[1, ..., 0] = -4.0, 4.0
    assert census_cost(codes, field, 3)[:, 3:-3, 8:-8].max() == 0
    field[..., 0] *= 2  # every match 4 px off
    assert 8 < census_cost(codes, field, 3)[:, 3:-3, 8:-8].mean() < 16


def test_a_small_change_of_the_field_changes_the_cost_little() -> None:
    rng = np.random.default_rng(8)
    images = [rng.integers(0, 256, (20, 30, 3), dtype=np.uint8) for _ in range(2)]
    codes = [census_codes(image) for image in images]
    field = np.zeros((2, 20, 30, 2), np.float32)
    field[..., 0] = np.array([-1.0, 1.0])[:, None, None] * (np.float32(4.5)
                                                          + rng.uniform(-1e-4, 1e-4, (2, 20, 30)))
    nudged = field + np.float32(2e-4) * np.sign(rng.standard_normal(field.shape)).astype(
        np.float32)
    # at x.5 a rounded match would jump a whole pixel (up to 24 bits); weighted, 24 * 2e-4
    assert np.abs(census_cost(codes, nudged, 1) - census_cost(codes, field, 1)).max() <= 24 * 3e-4


def test_bad_input_is_refused() -> None:
    image = np.zeros((8, 8, 3), np.uint8)
    with pytest.raises(ValueError, match="RGB uint8"):
        census_codes(image.astype(np.float32))
    with pytest.raises(ValueError, match="radius"):
        census_codes(image, 3)
    with pytest.raises(ValueError, match="a code per row"):
        census_cost([census_codes(image)], np.zeros((2, 8, 8, 2), np.float32), 3)
