"""The out-of-view strip continued linearly (crossview.geometry.out_of_view): the strip's end
against an explicit loop, the row slopes against the formula, and the property it is there for:
on a slanted plane whose strip was filled with a constant, the plane comes back exactly."""

from __future__ import annotations

import numpy as np
import pytest
from scipy.ndimage import median_filter

from crossview.geometry.out_of_view import extend_out_of_view, out_of_view_strip_end


@pytest.mark.parametrize("seed", range(4))
def test_strip_end_is_after_the_last_unmatched_column(seed: int) -> None:
    rng = np.random.default_rng(seed)
    disparity = rng.uniform(0, 8, (6, 10))
    ends = out_of_view_strip_end(disparity)
    for y in range(6):
        unmatched = [x for x in range(10) if x - disparity[y, x] < 0]
        assert ends[y] == (min(unmatched[-1] + 1, 9) if unmatched else 0)


def _plane(h: int = 40, w: int = 90) -> np.ndarray:
    y, x = np.mgrid[0:h, 0:w].astype(np.float64)
    return 20.0 + 0.25 * x + 0.1 * y  # every row's strip: x < d, about 27-32 px wide


def test_a_slanted_plane_comes_back_from_a_constant_fill() -> None:
    plane = _plane()
    filled = plane.copy()
    ends = out_of_view_strip_end(plane)
    assert (ends > 20).all()
    for y, end in enumerate(ends):
        filled[y, :end] = plane[y, end]  # what the row fill leaves there
    np.testing.assert_array_equal(out_of_view_strip_end(filled), ends)
    extended = extend_out_of_view(filled, span=8, rows=3)
    np.testing.assert_allclose(extended, plane, atol=1e-9)


@pytest.mark.parametrize(("seed", "rows"), [(0, 2), (1, 2), (2, 2), (3, 0), (4, 12)])
def test_the_strip_takes_the_filtered_row_slopes(seed: int, rows: int) -> None:
    rng = np.random.default_rng(seed)
    disparity = rng.uniform(0, 12, (9, 30)).astype(np.float32)
    span = 4
    ends = out_of_view_strip_end(disparity)
    slopes = []
    for y, x0 in enumerate(ends):
        ends_k = [min(x0 + k, 29) for k in (span // 2, span, 2 * span)]
        per_span = [(disparity[y, e] - disparity[y, x0]) / max(e - x0, 1) for e in ends_k]
        slopes.append(np.median(per_span))
    slopes = median_filter(np.array(slopes), size=2 * rows + 1, mode="nearest")
    expected = disparity.copy()
    for y, x0 in enumerate(ends):
        for x in range(x0):
            expected[y, x] = max(disparity[y, x0] + slopes[y] * (x - x0), 0.0)
    extended = extend_out_of_view(disparity, span, rows)
    assert extended.dtype == np.float32
    np.testing.assert_allclose(extended, expected, rtol=1e-5, atol=1e-5)


def test_a_map_without_a_strip_is_unchanged_and_bad_arguments_are_refused() -> None:
    disparity = np.full((5, 12), 0.5)
    disparity[:, 0] = 0.0  # x - d >= 0 everywhere
    np.testing.assert_array_equal(extend_out_of_view(disparity, 4, 1), disparity)
    with pytest.raises(ValueError, match="span"):
        extend_out_of_view(disparity, 1, 1)
    with pytest.raises(ValueError, match=r"\[H, W\]"):
        out_of_view_strip_end(disparity[0])
