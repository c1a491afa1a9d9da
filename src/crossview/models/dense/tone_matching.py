"""The right image's tones mapped onto the left's before SGBM, through the network's matches.

SGBM compares intensities: two cameras that expose differently (a gain, a gamma, a colour cast)
break it where the network, trained with such camera effects, holds (a real scene darkened to
0.7 on the right: the fused default from 7.8 to 24.6 % bad-2, the network alone 17.9 -> 17.1).
Histogram matching of the whole images does not fix it: occlusions and the different borders of
the two views change the histograms (docs/results/real-stereo/README.md, round six). Here the
samples are pairs of pixels the network matches: the left pixel ``(x, y)`` and the right pixel
``(x - d, y)`` wherever the network's two views agree. :func:`tone_curves` fits, per colour
channel, the non-decreasing curve from right values to the median left value of their matches;
:func:`apply_tone_curves` maps the right image through them.
"""

from __future__ import annotations

import logging

import numpy as np

log = logging.getLogger(__name__)

LEVEL_SAMPLES = 20  # a right value with fewer matched samples takes its curve from its neighbours
MIN_SAMPLES = 1000  # fewer matched pixels in all: no curve (the identity)
SAMPLE_STRIDE = 2  # the matches of every second row and column are sampled


def matched_samples(left: np.ndarray, right: np.ndarray, disparity: np.ndarray,
                    trusted: np.ndarray, stride: int = 1) -> tuple[np.ndarray, np.ndarray]:
    """The colours ``([N, C], [N, C])`` of the left pixels ``(x, y)`` where ``trusted [H, W]``
    (of every ``stride``-th row and column) and of the right pixels ``(round(x - disparity),
    y)`` they match (inside the image), from ``[H, W, C]`` images and the left view's
    ``disparity [H, W]`` px."""
    w = disparity.shape[1]
    ys, xs = np.nonzero(trusted[::stride, ::stride])
    ys, xs = ys * stride, xs * stride
    xr = np.rint(xs - disparity[ys, xs]).astype(np.int64)
    inside = (xr >= 0) & (xr < w)
    ys, xs, xr = ys[inside], xs[inside], xr[inside]
    return left[ys, xs], right[ys, xr]


def tone_curves(source: np.ndarray, target: np.ndarray) -> np.ndarray:
    """Per channel the non-decreasing curve ``[C, 256]`` float32 from ``source`` values to
    ``target`` values, fitted on matched samples ``source, target [N, C]`` (uint8): at each
    source value with at least :data:`LEVEL_SAMPLES` samples the median of their targets, made
    non-decreasing by pooling adjacent violators (weighted by the counts), linear in between,
    constant beyond; the identity with fewer than :data:`MIN_SAMPLES` samples."""
    channels = source.shape[1]
    levels = np.arange(256, dtype=np.float32)
    curves = np.tile(levels, (channels, 1))
    if source.shape[0] < MIN_SAMPLES:
        return curves
    for c in range(channels):
        # joint histogram [source value, target value] of the samples
        joint = np.bincount(source[:, c].astype(np.int64) * 256 + target[:, c],
                            minlength=256 * 256).reshape(256, 256)
        counts = joint.sum(axis=1)
        kept = np.flatnonzero(counts >= LEVEL_SAMPLES)
        if kept.size == 0:
            continue
        medians = _histogram_medians(joint[kept], counts[kept])
        curves[c] = np.interp(levels, kept.astype(np.float32),
                              _non_decreasing(medians, counts[kept].astype(np.float64)))
    return curves


def _histogram_medians(histograms: np.ndarray, counts: np.ndarray) -> np.ndarray:
    """The median ``[K]`` float32 of each of ``K`` samples of the values 0..255, from their
    histograms ``[K, 256]`` and sizes ``counts [K]`` (at least 1): the middle value, or the
    mean of the two middle values of an even count, as :func:`numpy.median` gives.

    >>> _histogram_medians(np.bincount([3, 3, 7, 9], minlength=256)[None], np.array([4]))
    array([5.], dtype=float32)
    """
    cumulative = np.cumsum(histograms, axis=1)

    def sorted_value(rank: np.ndarray) -> np.ndarray:  # each sample's rank-th smallest value
        return np.argmax(cumulative > rank[:, None], axis=1)

    lower, upper = sorted_value((counts - 1) // 2), sorted_value(counts // 2)
    return ((lower + upper) / 2).astype(np.float32)


def apply_tone_curves(image: np.ndarray, curves: np.ndarray) -> np.ndarray:
    """``image [H, W, C]`` uint8 with each channel mapped through its curve ``[C, 256]``
    (rounded, uint8)."""
    lookup = np.clip(np.rint(curves), 0, 255).astype(np.uint8)
    return np.ascontiguousarray(np.stack([lookup[c][image[..., c]]
                                          for c in range(image.shape[-1])], axis=-1))


def tone_difference(curves: np.ndarray, source: np.ndarray) -> float:
    """The mean ``|curve(v) - v|`` (grey levels) over the samples' source values
    ``source [N, C]`` uint8: how far the curves are from the identity where it matters."""
    channels = np.arange(source.shape[1])
    return float(np.abs(curves[channels, source] - source).mean()) if source.size else 0.0


def _non_decreasing(values: np.ndarray, weights: np.ndarray) -> np.ndarray:
    """The weighted least-squares non-decreasing fit of ``values [K]`` (pool adjacent
    violators)."""
    blocks: list[list[float]] = []  # [weighted mean, weight, length]
    for value, weight in zip(values.tolist(), weights.tolist(), strict=True):
        blocks.append([value, weight, 1])
        while len(blocks) > 1 and blocks[-2][0] > blocks[-1][0]:
            v2, w2, n2 = blocks.pop()
            v1, w1, n1 = blocks.pop()
            blocks.append([(v1 * w1 + v2 * w2) / (w1 + w2), w1 + w2, n1 + n2])
    return np.repeat([b[0] for b in blocks], [b[2] for b in blocks]).astype(np.float32)


def right_toned_to_left(left: np.ndarray, right: np.ndarray, disparity: np.ndarray,
                        trusted: np.ndarray, min_difference: float | None) -> np.ndarray:
    """The ``right [H, W, C]`` uint8 image mapped through :func:`tone_curves` fitted on the
    matches of the left view's ``disparity [H, W]`` px where ``trusted [H, W]`` (every
    :data:`SAMPLE_STRIDE`-th row and column), if the curves
    differ from the identity by at least ``min_difference`` grey levels
    (:func:`tone_difference`; logged at INFO, which the command shows as a ``note:``); else
    (and with ``min_difference`` None) ``right`` itself."""
    if min_difference is None:
        return right
    reference, source = matched_samples(left, right, disparity, trusted, SAMPLE_STRIDE)
    curves = tone_curves(source, reference)
    difference = tone_difference(curves, source)
    if difference < min_difference:
        return right
    log.info("the right image's tones differ from the left's by %.0f grey levels on average: "
             "SGBM matched it toned to the left (cameras that exposed differently)", difference)
    return apply_tone_curves(right, curves)
