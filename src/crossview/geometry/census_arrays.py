"""How well a stereo field's matches look alike: the census matching cost, numpy only.

The census code of a pixel (Zabih and Woodfill, ECCV 1994) has one bit per neighbour in a
``(2r + 1)^2`` window, set where the neighbour is darker than the pixel; it keeps only the
order of the grey levels, so it survives the exposure and tone differences of real pairs. The
cost of a match is the Hamming distance between a pixel's code and its match's code in the
other image (between the two pixels around a sub-pixel match, weighted linearly), and a
field's cost at a pixel its matches' costs averaged over a window around it: a wrong match
costs about half the bits, a right one few. The self-fusion
(:mod:`crossview.models.dense.self_fusion`) uses it to choose among its network runs; it runs
without torch (:mod:`crossview.runtime`).

>>> import numpy as np
>>> rng = np.random.default_rng(0)
>>> left = rng.integers(0, 256, (32, 48, 3), dtype=np.uint8)
>>> right = np.roll(left, -3, axis=1)  # disparity 3 everywhere
>>> field = np.zeros((2, 32, 48, 2), np.float32)
>>> field[0, ..., 0], field[1, ..., 0] = -3.0, 3.0  # left views x = -disparity
>>> codes = [census_codes(left), census_codes(right)]
>>> float(census_cost(codes, field, window=5)[:, 4:-4, 8:-8].max())
0.0
>>> field[0, ..., 0] = -5.0  # two pixels off: about half the 24 bits differ
>>> bool(census_cost(codes, field, window=5)[0, 4:-4, 8:-8].mean() > 8)
True
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import cv2
import numpy as np

CENSUS_RADIUS = 2  # a 5x5 window: 24 bits
# the bits set in each 16-bit value (a portable popcount: numpy < 2 has no bitwise_count)
_BITS = np.unpackbits(np.arange(2**16, dtype=np.uint16).view(np.uint8).reshape(-1, 2),
                      axis=1).sum(1).astype(np.uint8)


def census_codes(image: np.ndarray, radius: int = CENSUS_RADIUS) -> np.ndarray:
    """The census code ``[H, W]`` uint32 of an RGB uint8 ``image [H, W, 3]`` (grey levels by
    OpenCV's RGB to grey): bit ``k`` set where the ``k``-th neighbour of the ``(2r + 1)^2``
    window (row by row, the centre skipped) is darker than the pixel; replicated borders."""
    if image.ndim != 3 or image.shape[-1] != 3 or image.dtype != np.uint8:
        raise ValueError(f"image must be RGB uint8 [H, W, 3], got {image.shape} {image.dtype}")
    if not 1 <= radius <= 2:  # (2r + 1)^2 - 1 bits must fit 32
        raise ValueError(f"radius must be 1 or 2, got {radius}")
    grey = cv2.cvtColor(image, cv2.COLOR_RGB2GRAY)
    size = 2 * radius + 1
    padded = np.pad(grey, radius, mode="edge")
    h, w = grey.shape
    codes = np.zeros((h, w), np.uint32)
    offsets = [(dy, dx) for dy in range(size) for dx in range(size) if (dy, dx) != (radius,) * 2]
    for bit, (dy, dx) in enumerate(offsets):
        codes |= (padded[dy:dy + h, dx:dx + w] < grey).astype(np.uint32) << np.uint32(bit)
    return codes


def hamming(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """The number of bits ``[...]`` uint8 in which the uint32 codes ``a`` and ``b`` differ."""
    differ = np.bitwise_xor(a, b, dtype=np.uint32)
    return _BITS[differ & 0xFFFF] + _BITS[differ >> 16]


def census_cost(codes: Sequence[np.ndarray], field: np.ndarray, window: int, *,
                vertical: bool = False, mapper: Callable = map) -> np.ndarray:
    """Each view's census cost ``[2B, H, W]`` float32 (bits) of the ``field [2B, H, W, 2]``
    (both views or directions, first rows first; stereo: x = -disparity in first views): row
    ``i``'s pixel ``(y, x)`` against row ``(i + B) mod 2B``'s codes at ``m = x + field_x`` on
    the same row (a rectified pair), clipped to the image, the distances to the codes at
    ``floor(m)`` and ``floor(m) + 1`` weighted linearly (the cost moves at most 24 bits per
    pixel the field moves, so that the float32 differences between two runtimes of a network
    seldom change a choice made by it; a rounded match would jump); ``vertical`` (flow): at
    ``(y + field_y, x + field_x)``, the four codes around it weighted bilinearly. Averaged over
    ``window x window`` pixels (reflected borders; 1: the pixel's own). ``codes``: each row's
    :func:`census_codes`. ``mapper``: what maps the rows' computation over the rows (a thread
    pool's ``map`` computes them side by side: numpy and OpenCV release the GIL)."""
    n, h, w = field.shape[:3]
    if n % 2 or len(codes) != n:
        raise ValueError(f"need both views' fields [2B, H, W, 2] and a code per row, got "
                         f"{field.shape} and {len(codes)} codes")
    rows = np.broadcast_to(np.arange(h)[:, None], (h, w))

    def row_cost(i: int) -> np.ndarray:
        own, other = codes[i], codes[(i + n // 2) % n]
        x0, east = _corner(np.arange(w, dtype=np.float32)[None] + field[i, ..., 0], w)
        x1 = np.minimum(x0 + 1, w - 1)
        if vertical:
            y0, south = _corner(np.arange(h, dtype=np.float32)[:, None] + field[i, ..., 1], h)
            y1 = np.minimum(y0 + 1, h - 1)
            north = _between(hamming(own, other[y0, x0]), hamming(own, other[y0, x1]), east)
            cost = _between(north, _between(hamming(own, other[y1, x0]),
                                            hamming(own, other[y1, x1]), east), south)
        else:
            cost = _between(hamming(own, other[rows, x0]), hamming(own, other[rows, x1]), east)
        return cost if window == 1 else cv2.blur(cost, (window, window),
                                                  borderType=cv2.BORDER_REFLECT)

    return np.stack(list(mapper(row_cost, range(n)))).astype(np.float32, copy=False)


def _corner(match: np.ndarray, size: int) -> tuple[np.ndarray, np.ndarray]:
    """The index below ``match`` (coordinates clipped to ``[0, size - 1]``) and the weight
    ``match - index`` of the one above."""
    match = np.clip(match, 0, size - 1)
    below = np.floor(match)
    return below.astype(np.intp), match - below


def _between(near: np.ndarray, far: np.ndarray, weight: np.ndarray) -> np.ndarray:
    """``near + weight * (far - near)`` in float32."""
    near = near.astype(np.float32)
    return near + weight * (far.astype(np.float32) - near)
