"""Toning the right image to the left through matched pixels before SGBM
(crossview.models.dense.tone_matching and the stereo fusion's step 0): the samples a disparity
matches, the curves against the formula they come from, their shape (non-decreasing, the
identity without samples), and a pair whose right camera exposed darker fused as well as the
pair itself."""

from __future__ import annotations

import logging
from collections.abc import Callable

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from PIL import Image

from crossview.models.dense import sgbm_fusion
from crossview.models.dense.rank_transform import rank_matching_image
from crossview.models.dense.tone_matching import (
    LEVEL_SAMPLES,
    MIN_SAMPLES,
    _histogram_medians,
    _non_decreasing,
    apply_tone_curves,
    matched_samples,
    right_toned_to_left,
    tone_curves,
    tone_difference,
)

DISPARITY = 7  # px


def _pair(h: int = 160, w: int = 224) -> tuple[np.ndarray, np.ndarray]:
    """A textured left image and its right view at constant disparity ``[H, W, 3]`` uint8."""
    rng = np.random.default_rng(4)
    coarse = rng.integers(0, 256, (h // 4, (w + DISPARITY) // 4 + 1, 3), dtype=np.uint8)
    wide = np.asarray(Image.fromarray(coarse).resize((coarse.shape[1] * 4, h), Image.BICUBIC))
    return np.ascontiguousarray(wide[:, :w]), np.ascontiguousarray(wide[:, DISPARITY:DISPARITY + w])


def _gamma(image: np.ndarray, gamma: float, gain: float = 1.0) -> np.ndarray:
    return np.clip(np.rint(gain * 255 * (image / 255) ** gamma), 0, 255).astype(np.uint8)


def test_the_samples_are_the_pixels_the_disparity_matches() -> None:
    left = np.arange(2 * 5 * 1).reshape(2, 5, 1)
    right = 100 + left
    disparity = np.array([[0.0, 1.4, 1.6, 9.0, 0.0], [2.0, 0.0, 0.0, 0.0, 0.0]])
    trusted = np.array([[True, True, True, True, False], [True, True, False, False, False]])
    reference, source = matched_samples(left, right, disparity, trusted)
    # (0,0)->x 0; (0,1)->x 0 (1 - 1.4 rounds to 0); (0,2)->x 0; (0,3) and (1,0) leave the image
    np.testing.assert_array_equal(reference[:, 0], [0, 1, 2, 6])
    np.testing.assert_array_equal(source[:, 0], [100, 100, 100, 106])
    # every second row and column: (0, 0) and (0, 2)
    reference, source = matched_samples(left, right, disparity, trusted, stride=2)
    np.testing.assert_array_equal(reference[:, 0], [0, 2])
    np.testing.assert_array_equal(source[:, 0], [100, 100])


def test_the_curves_recover_a_gamma_and_gain() -> None:
    rng = np.random.default_rng(0)
    source = rng.integers(0, 256, (60_000, 3)).astype(np.uint8)
    truth = 255 * (np.arange(256) / 255) ** 0.6  # what source value v was in the target
    target = np.clip(np.rint(truth[source] + rng.normal(0, 3, source.shape)), 0, 255)
    curves = tone_curves(source, target.astype(np.uint8))
    assert curves.shape == (3, 256)
    assert np.abs(curves - truth).max() < 2.5
    assert tone_difference(curves, source) == pytest.approx(
        np.abs(truth[source] - source).mean(), abs=0.5)


def test_too_few_samples_give_the_identity() -> None:
    source = np.full((MIN_SAMPLES - 1, 3), 10, np.uint8)
    curves = tone_curves(source, source // 2)
    np.testing.assert_array_equal(curves, np.tile(np.arange(256, dtype=np.float32), (3, 1)))
    image = np.random.default_rng(1).integers(0, 256, (4, 5, 3)).astype(np.uint8)
    np.testing.assert_array_equal(apply_tone_curves(image, curves), image)


@settings(max_examples=60, deadline=None)
@given(st.lists(st.lists(st.integers(0, 255), min_size=1, max_size=40), min_size=1, max_size=6))
def test_the_medians_from_histograms_are_numpys(samples: list[list[int]]) -> None:
    histograms = np.stack([np.bincount(s, minlength=256) for s in samples])
    counts = np.array([len(s) for s in samples])
    expected = np.array([np.median(np.array(s, np.float32)) for s in samples], np.float32)
    np.testing.assert_array_equal(_histogram_medians(histograms, counts), expected)


def _loop_curves(source: np.ndarray, target: np.ndarray) -> np.ndarray:
    """The curves' formula written out: per channel and value with enough samples the median
    of their targets, made non-decreasing, linear in between."""
    curves = np.tile(np.arange(256, dtype=np.float32), (source.shape[1], 1))
    for c in range(source.shape[1]):
        kept = [v for v in range(256) if np.sum(source[:, c] == v) >= LEVEL_SAMPLES]
        medians = np.array([np.median(target[source[:, c] == v, c].astype(np.float32))
                            for v in kept], np.float32)
        weights = np.array([np.sum(source[:, c] == v) for v in kept], np.float64)
        curves[c] = np.interp(np.arange(256, dtype=np.float32), np.array(kept, np.float32),
                              _non_decreasing(medians, weights))
    return curves


def test_the_curves_follow_their_formula() -> None:
    rng = np.random.default_rng(5)
    source = rng.integers(0, 120, (20_000, 3)).astype(np.uint8)  # levels above 119: none
    target = np.clip(source * 1.3 + rng.normal(0, 6, source.shape), 0, 255).astype(np.uint8)
    np.testing.assert_array_equal(tone_curves(source, target), _loop_curves(source, target))


@settings(max_examples=40, deadline=None)
@given(st.lists(st.floats(-100, 100), min_size=1, max_size=30), st.integers(0, 2**31 - 1))
def test_pooling_adjacent_violators_is_the_least_squares_non_decreasing_fit(
        values: list[float], seed: int) -> None:
    y = np.array(values)
    w = np.random.default_rng(seed).uniform(0.5, 3, y.size)
    fit = _non_decreasing(y, w).astype(np.float64)
    assert np.all(np.diff(fit) >= -1e-4)
    assert np.sum(w * fit) == pytest.approx(np.sum(w * y), rel=1e-4, abs=1e-2)  # means kept
    # no non-decreasing sequence does better: compare with the sorted values and the constant
    cost = np.sum(w * (fit - y) ** 2)
    mean = np.sum(w * y) / np.sum(w)
    assert cost <= np.sum(w * (mean - y) ** 2) + 1e-2
    if np.all(np.diff(y) >= 0):
        np.testing.assert_allclose(fit, y, atol=1e-4)


def test_a_darker_right_image_is_toned_back_through_the_matches(
        caplog: pytest.LogCaptureFixture) -> None:
    left, right = _pair()
    dark = _gamma(right, 1.4, 0.8)
    disparity = np.full(left.shape[:2], float(DISPARITY))
    trusted = np.ones(left.shape[:2], bool)
    with caplog.at_level(logging.INFO, logger="crossview"):
        toned = right_toned_to_left(left, dark, disparity, trusted, 2.0)
    assert len(caplog.records) == 1 and "SGBM matched it toned" in caplog.records[0].getMessage()
    assert np.abs(toned.astype(int) - right).mean() < 1.5 < np.abs(dark.astype(int) - right).mean()
    assert right_toned_to_left(left, right, disparity, trusted, 2.0) is right  # no difference
    assert right_toned_to_left(left, dark, disparity, trusted, None) is dark


@pytest.mark.parametrize("run", [{}, {"radius": 5, "grey_channels": 2}])
def test_the_fusion_gives_sgbm_the_toned_right_image(run: dict,
                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    """Step 0 of the stereo fusion: SGBM's runs on both views (the colour run, and the run on
    grey and rank images made from them) see the right image toned to the left (through the
    network's consistent matches) when the threshold is set, the image as it is when not."""
    left, right = _pair()
    dark = _gamma(right, 1.6, 0.6)
    field = torch.zeros(2, *left.shape[:2], 2)
    field[0, ..., 0], field[1, ..., 0] = -DISPARITY, DISPARITY  # the network: exact
    seen: list[np.ndarray] = []

    def recording(matcher: Callable[..., np.ndarray]) -> Callable[..., np.ndarray]:
        def run(left_image: np.ndarray, right_image: np.ndarray, *args, **kwargs) -> np.ndarray:
            seen.append(right_image)
            return matcher(left_image, right_image, *args, **kwargs)
        return run

    for name in ("sgbm_disparity", "sgbm_right_disparity"):
        monkeypatch.setattr(sgbm_fusion, name, recording(getattr(sgbm_fusion, name)))
    monkeypatch.setattr(sgbm_fusion, "FUSION_SGBM_RUNS", (run,))
    x0, x1 = (torch.from_numpy(v).permute(2, 0, 1)[None].float() for v in (left, dark))
    for threshold, expected in ((None, dark), (2.0, right)):
        monkeypatch.setattr(sgbm_fusion, "TONE_MATCH_MIN_GREY", threshold)
        seen.clear()
        sgbm_fusion.fuse_with_sgbm(x0, x1, field)
        assert len(seen) == 2  # the left view's run and the right view's
        if run:  # channel 0 of the rank run's images: the grey image
            expected = rank_matching_image(expected, **run)[..., :1]
        for image in seen:
            compared = image[..., :1] if run else image
            assert np.abs(compared.astype(int) - expected).mean() < 1.5
