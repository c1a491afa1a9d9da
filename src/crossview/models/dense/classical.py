"""The classical matchers crossview scores and fuses with: OpenCV's semi-global block matching
(SGBM) with Middlebury's filling of a sparse disparity map, OpenCV's DIS optical flow and its
variational refinement.

SGBM runs in 3-way mode on the RGB images, ``blockSize`` 5, ``P1 = 8*3*25``, ``P2 = 32*3*25``,
``uniquenessRatio`` 10, speckle window 100 / range 2, ``minDisparity`` 0, and a search range
``numDisparities = ceil(1.1 * max disparity / 16) * 16`` (:func:`sgbm_num_disparities`; the
baseline reads the maximum off the ground truth, the fusion off the network). Pixels SGBM
leaves without a disparity (occlusions, weak texture, speckles) are holes, NaN here.
"""

from __future__ import annotations

import math

import numpy as np

from crossview.data.sgbm_raw import disparity_from_sgbm
from crossview.errors import UserError

try:
    import cv2
except ImportError:  # a core dependency; a broken install gets one clear error (require_cv2)
    cv2 = None

SGBM_BLOCK = 5
SGBM_UNIQUENESS = 10
SGBM_RANGE_MARGIN = 1.1


def require_cv2(what: str) -> object:
    """The ``cv2`` module, else a :class:`UserError` saying that ``what`` needs OpenCV."""
    if cv2 is None:
        raise UserError(f"{what} needs OpenCV: pip install opencv-python-headless")
    return cv2


def opencv_version() -> str | None:
    """The installed OpenCV version, or None without OpenCV."""
    return None if cv2 is None else cv2.__version__


def sgbm_num_disparities(max_disparity: float) -> int:
    """``ceil(1.1 * max_disparity / 16) * 16`` (at least 16): SGBM's search range."""
    return max(16, math.ceil(SGBM_RANGE_MARGIN * max_disparity / 16) * 16)


def sgbm_disparity(left: np.ndarray, right: np.ndarray, num_disparities: int, *,
                   pad: bool = False, uniqueness: int = SGBM_UNIQUENESS) -> np.ndarray:
    """OpenCV SGBM with the parameters above: RGB uint8 ``[H, W, 3]`` images -> left
    disparity ``[H, W]`` float32 px, NaN at holes.

    OpenCV leaves the first ``num_disparities`` columns holes (their search would leave the
    image). ``pad``: the pair is first widened on the left by ``num_disparities`` columns that
    repeat each image's first column, so that SGBM answers there too wherever the match lies
    inside the right image (the padding is cropped off again). Without ``pad`` OpenCV needs a
    range below the width: a larger one is cut to the largest multiple of 16 that fits, and
    images at most 16 px wide (no range fits) are all holes. ``uniqueness``: OpenCV's
    ``uniquenessRatio`` (%; the baseline's is :data:`SGBM_UNIQUENESS`).
    """
    opencv = require_cv2("SGBM")
    width = left.shape[1]
    if pad:
        left, right = (opencv.copyMakeBorder(np.ascontiguousarray(image), 0, 0, num_disparities,
                                             0, opencv.BORDER_REPLICATE)
                       for image in (left, right))
    elif width <= 16:
        return np.full(left.shape[:2], np.nan, np.float32)
    else:
        num_disparities = min(num_disparities, (width - 1) // 16 * 16)
    channels = left.shape[2]
    matcher = opencv.StereoSGBM_create(
        minDisparity=0, numDisparities=num_disparities, blockSize=SGBM_BLOCK,
        P1=8 * channels * SGBM_BLOCK**2, P2=32 * channels * SGBM_BLOCK**2,
        uniquenessRatio=uniqueness, speckleWindowSize=100, speckleRange=2,
        mode=opencv.STEREO_SGBM_MODE_SGBM_3WAY)
    disparity = disparity_from_sgbm(matcher.compute(np.ascontiguousarray(left),
                                                    np.ascontiguousarray(right)))
    return np.ascontiguousarray(disparity[:, -width:])


def sgbm_right_disparity(left: np.ndarray, right: np.ndarray, num_disparities: int, *,
                         pad: bool = False, uniqueness: int = SGBM_UNIQUENESS) -> np.ndarray:
    """SGBM's disparity ``[H, W]`` (positive px, NaN at holes) of the *right* view: the pair
    mirrored left-right, so that the right image becomes a left one (``pad`` and
    ``uniqueness`` as in :func:`sgbm_disparity`; with ``pad`` SGBM answers at the right
    view's last columns too)."""
    mirrored = sgbm_disparity(right[:, ::-1], left[:, ::-1], num_disparities, pad=pad,
                              uniqueness=uniqueness)
    return np.ascontiguousarray(mirrored[:, ::-1])


def left_right_checked(disparity: np.ndarray, other: np.ndarray, threshold: float,
                       view: str = "left") -> np.ndarray:
    """``disparity [H, W]`` (one view's, positive px, NaN at holes) with holes where the other
    view's map ``other [H, W]`` does not answer the same: pixel ``x`` of the left view matches
    ``round(x - d)`` of the right (of the right view: ``round(x + d)`` of the left), and keeps
    ``d`` only if that pixel lies inside the image and holds a disparity within ``threshold``
    px of ``d``.

    >>> left_right_checked(np.array([[np.nan, 3.0, 1.0, 1.0]]),  # outside, agrees, a hole
    ...                    np.array([[1.0, 1.0, np.nan, 1.0]]), 0.5).tolist()
    [[nan, nan, 1.0, nan]]
    """
    if disparity.ndim != 2 or other.shape != disparity.shape:
        raise ValueError(f"need two [H, W] maps of one shape, got {disparity.shape=}, "
                         f"{other.shape=}")
    if view not in ("left", "right"):
        raise ValueError(f"view must be 'left' or 'right', got {view!r}")
    width = disparity.shape[1]
    sign = -1.0 if view == "left" else 1.0
    known = np.isfinite(disparity)
    match = np.round(np.arange(width) + sign * np.where(known, disparity, 0.0)).astype(np.int64)
    inside = known & (match >= 0) & (match < width)
    answer = np.take_along_axis(other, np.clip(match, 0, width - 1), axis=1)
    agree = inside & (np.abs(answer - disparity) <= threshold)  # NaN compares False
    return np.where(agree, disparity, np.nan).astype(disparity.dtype)


def hole_run_length(disparity: np.ndarray) -> np.ndarray:
    """Per pixel of a sparse map ``[H, W]`` (NaN = hole) the length of the run of holes along
    its row that holds it (0 at valid pixels): ``[H, W]`` int64.

    >>> hole_run_length(np.array([[np.nan, 5.0, np.nan, np.nan, 3.0]])).tolist()
    [[1, 0, 2, 2, 0]]
    """
    valid = np.isfinite(disparity)
    before, after = nearest_valid_columns(disparity)
    return np.where(valid, 0, after - before - 1)


def nearest_valid_columns(disparity: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Per pixel of a sparse map ``[H, W]`` (NaN = hole) the column of the nearest valid pixel
    at or before it in its row (-1 if none) and at or after it (``W`` if none): two
    ``[H, W]`` int64."""
    if disparity.ndim != 2:
        raise ValueError(f"disparity must be [H, W], got {disparity.shape=}")
    valid = np.isfinite(disparity)
    w = disparity.shape[1]
    columns = np.arange(w)
    before = np.maximum.accumulate(np.where(valid, columns, -1), axis=1)
    after = np.minimum.accumulate(np.where(valid, columns, w)[:, ::-1], axis=1)[:, ::-1]
    return before, after


def dis_flow(frame0: np.ndarray, frame1: np.ndarray, start: np.ndarray | None = None
             ) -> np.ndarray:
    """OpenCV DIS (medium preset) on the grey frames: RGB uint8 ``[H, W, 3]`` (or grey uint8
    ``[H, W]``) frames -> flow ``[H, W, 2]`` float32 (u, v) px. ``start``: a flow ``[H, W, 2]``
    its coarse-to-fine search begins from (``None``: from zero; not changed)."""
    opencv = require_cv2("DIS optical flow")
    first = None if start is None else np.array(start, dtype=np.float32, order="C")
    return opencv.DISOpticalFlow_create(opencv.DISOPTICAL_FLOW_PRESET_MEDIUM).calc(
        grey_image(frame0), grey_image(frame1), first)


def variational_refinement(flow: np.ndarray, frame0: np.ndarray, frame1: np.ndarray, *,
                           iterations: int, sor_iterations: int, alpha: float, delta: float,
                           gamma: float) -> np.ndarray:
    """A flow ``[H, W, 2]`` (u, v px, ``frame0`` to ``frame1``) polished by OpenCV's variational
    refinement, the energy DIS polishes each of its scales with, on the grey frames (RGB uint8
    ``[H, W, 3]``): ``iterations`` fixed-point iterations of ``sor_iterations`` successive
    over-relaxation steps each, minimising ``delta`` x brightness constancy + ``gamma`` x
    gradient constancy + ``alpha`` x smoothness (robust penalties, at the one full scale).
    Returns a new ``[H, W, 2]`` float32 array."""
    opencv = require_cv2("variational flow refinement")
    refinement = opencv.VariationalRefinement_create()
    refinement.setFixedPointIterations(iterations)
    refinement.setSorIterations(sor_iterations)
    refinement.setAlpha(alpha)
    refinement.setDelta(delta)
    refinement.setGamma(gamma)
    refined = np.array(flow, dtype=np.float32, order="C")  # refined in place
    refinement.calc(grey_image(frame0), grey_image(frame1), refined)
    return refined


def grey_image(frame: np.ndarray) -> np.ndarray:
    """An RGB uint8 ``[H, W, 3]`` frame as OpenCV's grey ``[H, W]`` uint8 (a grey ``[H, W]``
    frame as it is)."""
    if frame.ndim == 2:
        return frame
    return require_cv2("grey images").cvtColor(np.ascontiguousarray(frame), cv2.COLOR_RGB2GRAY)


def fill_holes(disparity: np.ndarray) -> np.ndarray:
    """Middlebury's filling of a sparse disparity map ``[H, W]`` (NaN = hole): along each row a
    hole takes the smaller (farther) of the nearest valid disparities to its left and right, or
    the one that exists; a row without any valid pixel becomes 0.

    >>> fill_holes(np.array([[np.nan, 5.0, np.nan, np.nan, 3.0, np.nan]])).tolist()
    [[5.0, 5.0, 3.0, 3.0, 3.0, 3.0]]
    """
    before, after = nearest_valid_columns(disparity)
    w = disparity.shape[1]
    padded = np.concatenate([disparity, np.full((disparity.shape[0], 1), np.inf)], axis=1)
    padded = np.where(np.isfinite(padded), padded, np.inf)
    rows = np.arange(disparity.shape[0])[:, None]
    left = padded[rows, np.where(before >= 0, before, w)]
    right = padded[rows, after]
    filled = np.minimum(left, right)
    return np.where(np.isfinite(filled), filled, 0.0).astype(np.float32)
