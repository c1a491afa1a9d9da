"""A colour-weighted median of a disparity map along its depth edges.

Block matching (SGBM's 5x5 blocks) fattens the nearer side of a depth edge by up to half a
block, and the row fill of occlusions copies whatever value ends a row segment; both put depth
edges a few pixels away from the colour edges of the image. Around every jump of the disparity
map, each pixel takes the weighted median of the disparities in a window about it, a
neighbour's weight falling with its colour difference from the pixel (the edge-aware
post-processing of stereo matching: Ma et al., "Constant time weighted median filtering for
stereo matching and beyond", ICCV 2013). A pixel thus takes the disparity of the side of the
edge whose colour it shares. Pixels away from the jumps are left as they are.
:func:`edge_weighted_median_flow` does the same for a flow field around its motion edges, each
component on its own (the weighted median is the classical post-processing of optical flow:
Sun, Roth and Black, "Secrets of optical flow estimation and their principles", CVPR 2010).

The weighted median of values ``v_j`` with weights ``w_j`` is the smallest ``v_k`` such that
the weights of the values up to ``v_k`` reach half of all weight: the samples ordered by value
(equal values by their place in the window, NaN last), their weights summed in that order in
float32, the first value at which the sum reaches half of the total. Where torch is loaded
already (the library's pipelines) and crossview's C++ kernels build on this machine
(:mod:`crossview.cpu_kernels`), float32 maps guided by uint8 images are filtered by the compiled
kernel, with the same numbers (tested) in under a third of the time; elsewhere (the torch-free
runtime, other dtypes) by numpy.
"""

from __future__ import annotations

import sys
from collections.abc import Callable

import numpy as np

# colour differences |I_j - I_i|_1 of uint8 images: 0 .. 3 * 255
COLOUR_DIFFERENCES = 3 * 255 + 1


def depth_edge_band(disparity: np.ndarray, jump: float, width: int) -> np.ndarray:
    """Pixels within ``width`` px (Chebyshev) of a depth edge: a pair of 4-neighbours whose
    disparities differ by more than ``jump`` px.

    ``disparity [H, W]`` -> ``[H, W]`` bool.
    """
    if disparity.ndim != 2:
        raise ValueError(f"disparity must be [H, W], got {disparity.shape}")
    edge = np.zeros(disparity.shape, dtype=bool)
    across = np.abs(np.diff(disparity, axis=1)) > jump
    edge[:, 1:] |= across
    edge[:, :-1] |= across
    down = np.abs(np.diff(disparity, axis=0)) > jump
    edge[1:] |= down
    edge[:-1] |= down
    if width == 0:
        return edge
    return _dilated(_dilated(edge, width, axis=0), width, axis=1)


def _dilated(mask: np.ndarray, width: int, axis: int) -> np.ndarray:
    """``mask [H, W]`` bool, True within ``width`` px of a True pixel along ``axis``."""
    out = mask.copy()
    n = mask.shape[axis]
    for k in range(1, min(width, n - 1) + 1):
        ahead = [slice(None)] * 2
        behind = [slice(None)] * 2
        ahead[axis], behind[axis] = slice(k, None), slice(None, n - k)
        out[tuple(ahead)] |= mask[tuple(behind)]
        out[tuple(behind)] |= mask[tuple(ahead)]
    return out


def weighted_median_at(values: np.ndarray, image: np.ndarray, mask: np.ndarray,
                       radius: int, step: int, sigma_colour: float,
                       chunk: int = 32768) -> np.ndarray:
    """The colour-weighted median of ``values`` at the pixels of ``mask``.

    Args:
        values: ``[H, W]`` float (a disparity map), or ``[H, W, C]`` (a flow field: each
            channel's median with the same weights).
        image: the view's image ``[H, W, 3]`` (0..255), the guide of the weights.
        mask: ``[H, W]`` bool, the pixels to filter; the others are returned as they are.
        radius, step: the window's samples are the offsets ``-radius, -radius + step, ...,
            radius`` in y and x (the image's border pixels repeat beyond it).
        sigma_colour: a neighbour ``j`` of pixel ``i`` weighs ``exp(-|I_j - I_i|_1 /
            sigma_colour)`` (sum over the three channels).
        chunk: pixels filtered at a time by numpy (bounds the memory: ``chunk x samples``
            floats).

    Returns:
        ``values``' shape and dtype.
    """
    size = values.shape[:2]
    if values.ndim not in (2, 3) or image.shape != (*size, 3) or mask.shape != size:
        raise ValueError(f"need values [H, W] or [H, W, C], image [H, W, 3] and mask [H, W]; "
                         f"got {values.shape}, {image.shape}, {mask.shape}")
    if radius < 0 or step < 1 or sigma_colour <= 0:
        raise ValueError(f"need radius >= 0, step >= 1 and sigma_colour > 0; got {radius=}, "
                         f"{step=}, {sigma_colour=}")
    planes = values if values.ndim == 3 else values[..., None]
    ys, xs = np.nonzero(mask)
    compiled = (_compiled_median() if values.dtype == np.float32 and image.dtype == np.uint8
                else None)
    if compiled is not None:
        filtered = _compiled_filter(compiled, planes, image, ys * size[1] + xs, radius, step,
                                    sigma_colour)
    else:
        filtered = _numpy_filter(planes, image, ys, xs, radius, step, sigma_colour, chunk)
    out = planes.copy()
    out[ys, xs] = filtered
    return out if values.ndim == 3 else out[..., 0]


def _colour_weights(colour: np.ndarray, sigma_colour: float) -> np.ndarray:
    """``exp(-colour / sigma_colour)`` in float32: ``colour`` float32 -> the same shape."""
    return np.exp(colour * np.float32(-1.0 / sigma_colour))


def _compiled_median() -> Callable | None:
    """The C++ kernel ``weighted_median`` where torch is loaded already and the kernels build
    here, else ``None``: the median never loads torch itself (the runtime runs without it)."""
    if sys.modules.get("torch") is None:  # not loaded (or blocked: None)
        return None
    from crossview.cpu_kernels import cpu_build

    return None if cpu_build.unavailable_reason() else cpu_build.extension().weighted_median


def _compiled_filter(kernel: Callable, planes: np.ndarray, image: np.ndarray,
                     pixels: np.ndarray, radius: int, step: int,
                     sigma_colour: float) -> np.ndarray:
    """The C++ kernel's medians: ``planes [H, W, C]`` float32, ``image [H, W, 3]`` uint8,
    ``pixels [n]`` (``y * W + x``) -> ``[n, C]``."""
    torch = sys.modules["torch"]
    weight_of = _colour_weights(np.arange(COLOUR_DIFFERENCES, dtype=np.float32), sigma_colour)
    return kernel(torch.from_numpy(np.ascontiguousarray(planes)),
                  torch.from_numpy(np.ascontiguousarray(image)),
                  torch.from_numpy(pixels.astype(np.int64)), radius, step,
                  torch.from_numpy(weight_of)).numpy()


def _order_by_value(sampled: np.ndarray) -> np.ndarray:
    """The order of each row of ``sampled [n, K]``: by value, equal values by column, NaN last
    -> ``[n, K]`` column indices. Float32 rows sort as one 64-bit key per sample (the value's
    bits made monotonic, then the column): a plain sort, several times faster than a stable
    argsort."""
    if sampled.dtype != np.float32:
        return np.argsort(sampled, axis=1, kind="stable")
    bits = sampled.view(np.uint32)
    negative = bits >= np.uint32(0x80000000)
    monotonic = np.where(negative, ~bits, bits | np.uint32(0x80000000))
    monotonic[np.isnan(sampled)] = np.uint32(0xFFFFFFFF)  # every NaN after every number
    keys = monotonic.astype(np.uint64)
    keys <<= np.uint64(32)
    keys |= np.arange(sampled.shape[1], dtype=np.uint64)
    keys.sort(axis=1)
    return (keys & np.uint64(0xFFFFFFFF)).astype(np.intp)


def _numpy_filter(planes: np.ndarray, image: np.ndarray, ys: np.ndarray, xs: np.ndarray,
                  radius: int, step: int, sigma_colour: float, chunk: int) -> np.ndarray:
    """numpy's medians: ``planes [H, W, C]``, ``image [H, W, 3]``, the pixels ``ys, xs [n]``
    -> ``[n, C]`` in ``planes``' dtype."""
    width = planes.shape[1] + 2 * radius
    values_at = [np.pad(planes[..., c], radius, mode="edge").ravel()
                 for c in range(planes.shape[-1])]
    channels = [np.pad(image[..., c].astype(np.float32), radius, mode="edge").ravel()
                for c in range(3)]
    centres = (ys + radius) * width + (xs + radius)
    offsets = np.arange(-radius, radius + 1, step)
    deltas = (offsets[:, None] * width + offsets[None, :]).reshape(1, -1)
    filtered = np.empty((len(centres), planes.shape[-1]), planes.dtype)
    for start in range(0, len(centres), chunk):
        centre = centres[start:start + chunk, None]
        samples = centre + deltas  # [n, K] indices into the padded maps
        colour = sum(np.abs(c.take(samples) - c.take(centre)) for c in channels)
        weights = _colour_weights(colour, sigma_colour)
        for plane, value_at in enumerate(values_at):
            sampled = value_at.take(samples)
            order = _order_by_value(sampled)
            cumulative = np.cumsum(np.take_along_axis(weights, order, axis=1), axis=1)
            median_at = (cumulative < 0.5 * cumulative[:, -1:]).sum(axis=1, keepdims=True)
            at = np.take_along_axis(order, median_at, axis=1)  # the median's sample
            filtered[start:start + chunk, plane] = np.take_along_axis(sampled, at, axis=1)[:, 0]
    return filtered


def edge_weighted_median(disparity: np.ndarray, image: np.ndarray, *, jump: float,
                         width: int, radius: int, step: int,
                         sigma_colour: float) -> np.ndarray:
    """:func:`weighted_median_at` the pixels of :func:`depth_edge_band` ``(disparity, jump,
    width)``: ``disparity [H, W]``, ``image [H, W, 3]`` (0..255) -> ``[H, W]``."""
    band = depth_edge_band(disparity, jump, width)
    return weighted_median_at(disparity, image, band, radius, step, sigma_colour)


def edge_weighted_median_flow(flow: np.ndarray, image: np.ndarray, *, jump: float, width: int,
                              radius: int, step: int, sigma_colour: float) -> np.ndarray:
    """:func:`weighted_median_at` each component of ``flow [H, W, 2]`` at the pixels near a
    motion edge (:func:`depth_edge_band` of either component), guided by the frame ``image
    [H, W, 3]`` (0..255) the flow starts from -> ``[H, W, 2]``."""
    if flow.ndim != 3 or flow.shape[-1] != 2:
        raise ValueError(f"flow must be [H, W, 2], got {flow.shape}")
    band = depth_edge_band(flow[..., 0], jump, width) | depth_edge_band(flow[..., 1], jump, width)
    return weighted_median_at(flow, image, band, radius, step, sigma_colour)
