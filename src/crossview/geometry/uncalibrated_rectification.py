"""Stereo rectification without a calibration: two photographs of one scene, taken side by side
(a phone moved sideways, two cameras of unknown rig), become a rectified pair whose matches lie
on the same row, so that :func:`crossview.estimate_disparity` applies.

The method is Fusiello and Irsara's quasi-Euclidean rectification (Machine Vision and
Applications 22, 2011). Both cameras are modelled as one pinhole ``K`` (focal ``f``, principal
point at the image centre, square pixels), and the pair is rectified by rotating each camera:
``H0 = K R0 K^-1``, ``H1 = K R1 K^-1``. Rotated so, the fundamental matrix is
``F = K^-T R1^T [e1]x R0 K^-1`` (``[e1]x`` the cross product with the x axis: rows equal).
Five angles (the left camera's about y and z, the right's about x, y and z; a common rotation
about the baseline is free) and ``f = 3^a (W + H)`` are fitted to point matches by minimising
their Sampson distances to ``F`` (least squares with a robust loss, and a weak pull towards
parallel cameras and ``f = W + H`` for what the matches leave open). Unlike Hartley's
projective rectification (OpenCV's ``stereoRectifyUncalibrated``) the homographies are rotations
of a camera, so the images are not sheared or stretched, and a pair that is already rectified
stays as it is.

The matches are SIFT features (Lowe's ratio test) of the pair shrunk to at most
:data:`MATCH_PIXELS` pixels, kept where OpenCV's RANSAC fit of a fundamental matrix counts them
inliers. After the rotations, one shift of both images keeps the left image's centre in place:
the cameras are then parallel, and every point lies at a positive disparity. Only where the
matches' disparities (their :data:`DISPARITY_PERCENTILE` percentile) fall below
:data:`DISPARITY_MARGIN` of the width is the right image shifted along the rows to bring them
there (:attr:`UncalibratedRectification.disparity_shift`, what a rig's ``doffs`` is). Without a
calibration there is no metric depth. What the turns bring into the frame repeats the images'
edges (:data:`BORDER`): black borders led the fused default astray on real scenes whose
rectification was all but the identity
(docs/results/real-stereo/real_uncalibrated_rectification.py). A pair whose matches already lie
on one row (within :data:`KEEP_ROWS_PX`) is kept as it is.
"""

from __future__ import annotations

import logging
import math
from dataclasses import dataclass

import numpy as np

from crossview.data.rig_calibration import require_opencv
from crossview.errors import UserError
from crossview.geometry.pair_order import warn_if_swapped

log = logging.getLogger(__name__)

# features are found on the pair shrunk to at most this many pixels: the size the stereo default
# matches larger pairs at, where the rows must agree (a 12 MP pair: 5,000-10,000 features)
MATCH_PIXELS = 700_000
# a pair whose matches' rows already agree this well (median, px at the matching size) is kept
# as it is: resampling cost rectified real scenes 0.7-0.9 points of bad-2, and their matches'
# rows agree to 0.05-0.31 px (docs/results/real-stereo/real_uncalibrated_rectification.py)
KEEP_ROWS_PX = 0.5
RATIO = 0.75  # Lowe's ratio test: the best match clearly better than the second best
RANSAC_PX = 1.0  # RANSAC's distance to the epipolar line (px at the matching size)
MIN_MATCHES = 30  # fewer inliers than this: no rectification
# the inliers' median row difference (px at the matching size) above which a warning is logged
MAX_ROW_ERROR_PX = 1.0
DISPARITY_MARGIN = 0.01  # the least disparity of the matches after the shift, times the width
DISPARITY_PERCENTILE = 1.0  # the matches' "least" disparity: this percentile (outliers aside)
# OpenCV's INTER_<name> that resamples the images; cubic chosen over linear by
# leave-one-group-out on real scenes (docs/results/real-stereo/real_uncalibrated_rectification.py)
INTERPOLATION = "cubic"
BORDER = "replicate"  # OpenCV's BORDER_<name> beyond the edges (black borders mislead the matchers)
# a pull of the angles towards 0 and of f towards W + H, so that what the matches leave open
# (matches on one plane, or a pair that is already rectified: many turns fit) stays as it is:
# each match's residual grows by 1 px per PRIOR_RADIANS of turn and per PRIOR_FOCAL_POWER of a;
# chosen by leave-one-group-out over {0.1, 0.2, 0.5, 1, 2} x {5, 20, 100} on real scenes, by the
# rows of their true matches (docs/results/real-stereo/real_rectification_prior.py): the focal
# length is left all but free
PRIOR_RADIANS = 0.5
PRIOR_FOCAL_POWER = 100.0
_E1 = np.array([[0.0, 0.0, 0.0], [0.0, 0.0, -1.0], [0.0, 1.0, 0.0]])  # [e1]x


@dataclass(frozen=True)
class UncalibratedRectification:
    """A pair rectified from its own matches.

    ``left``, ``right``: the rectified images ``[H, W, C]`` (the input dtype and size);
    ``left_homography``, ``right_homography`` ``[3, 3]``: original pixel ``(x, y, 1)`` ->
    rectified pixel (up to scale); ``focal``: the fitted focal length (px; ``None`` for a pair
    kept as it is, see :data:`KEEP_ROWS_PX`); ``matches``: the point matches fitted;
    ``row_error``: their median ``|y0 - y1|`` (px) after rectification;
    ``disparity_shift``: how far (px, <= 0) the right image was moved along the rows (a
    disparity ``d`` of the rectified pair is ``d + disparity_shift`` of the pair only rotated,
    whose disparity is 0 at infinity; 0 unless the matches needed it); ``disparity_range``:
    the matches' disparities after rectification, 1st and 99th percentile (px).
    """

    left: np.ndarray
    right: np.ndarray
    left_homography: np.ndarray
    right_homography: np.ndarray
    focal: float | None
    matches: int
    row_error: float
    disparity_shift: float
    disparity_range: tuple[float, float]


def feature_matches(left: np.ndarray, right: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """SIFT matches of two images (``[H, W]`` or ``[H, W, 3]`` uint8) that pass the ratio test
    and a RANSAC fit of a fundamental matrix: ``points0, points1 [N, 2]`` float64 pixel
    ``(x, y)`` of the full-size images. Raises :class:`UserError` with fewer than
    :data:`MIN_MATCHES`."""
    cv2 = require_opencv()
    factor = matching_factor(*left.shape[:2])
    sift = cv2.SIFT_create()
    found = []
    for image in (left, right):
        grey = image if image.ndim == 2 else cv2.cvtColor(np.ascontiguousarray(image),
                                                           cv2.COLOR_RGB2GRAY)
        if factor < 1:
            grey = cv2.resize(grey, (round(grey.shape[1] * factor), round(grey.shape[0] * factor)),
                              interpolation=cv2.INTER_AREA)
        found.append(sift.detectAndCompute(grey, None))
    (keys0, desc0), (keys1, desc1) = found
    pairs = []
    if desc0 is not None and desc1 is not None and len(keys1) >= 2:
        pairs = [m[0] for m in cv2.BFMatcher(cv2.NORM_L2).knnMatch(desc0, desc1, k=2)
                 if len(m) == 2 and m[0].distance < RATIO * m[1].distance]
    points0 = np.array([keys0[m.queryIdx].pt for m in pairs], np.float64).reshape(-1, 2)
    points1 = np.array([keys1[m.trainIdx].pt for m in pairs], np.float64).reshape(-1, 2)
    if len(pairs) >= 8:
        _, inlier = cv2.findFundamentalMat(points0, points1, cv2.FM_RANSAC, RANSAC_PX, 0.999)
        keep = np.zeros(len(pairs), bool) if inlier is None else inlier.ravel().astype(bool)
        points0, points1 = points0[keep], points1[keep]
    if len(points0) < MIN_MATCHES:
        raise UserError(f"found {len(points0)} consistent feature matches between the two images, "
                        f"fewer than the {MIN_MATCHES} rectification needs: are they two views "
                        "of one scene, with texture in common?")
    return points0 / factor, points1 / factor


def matching_factor(height: int, width: int) -> float:
    """The factor (<= 1) that shrinks an ``height x width`` image to at most
    :data:`MATCH_PIXELS` pixels for finding features."""
    return min(1.0, math.sqrt(MATCH_PIXELS / (height * width)))


def camera_matrix(focal: float, height: int, width: int) -> np.ndarray:
    """``K [3, 3]``: ``focal`` px, principal point at the centre of an ``height x width``
    image."""
    return np.array([[focal, 0.0, (width - 1) / 2], [0.0, focal, (height - 1) / 2],
                     [0.0, 0.0, 1.0]])


def rotation(angles: np.ndarray) -> np.ndarray:
    """The rotation ``[3, 3]`` about x, then y, then z by ``angles [3]`` (radians)."""
    cx, cy, cz = np.cos(angles)
    sx, sy, sz = np.sin(angles)
    about_x = np.array([[1, 0, 0], [0, cx, -sx], [0, sx, cx]])
    about_y = np.array([[cy, 0, sy], [0, 1, 0], [-sy, 0, cy]])
    about_z = np.array([[cz, -sz, 0], [sz, cz, 0], [0, 0, 1]])
    return about_z @ about_y @ about_x


def _cameras(parameters: np.ndarray, height: int, width: int
             ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``K``, ``R0``, ``R1`` of the parameters ``[6]``: the left's angles about y and z, the
    right's about x, y and z, and ``a`` of ``f = 3^a (W + H)``."""
    r0 = rotation(np.array([0.0, parameters[0], parameters[1]]))
    r1 = rotation(parameters[2:5])
    return camera_matrix(3.0 ** parameters[5] * (width + height), height, width), r0, r1


def sampson_distances(fundamental: np.ndarray, points0: np.ndarray,
                      points1: np.ndarray) -> np.ndarray:
    """The signed Sampson distances ``[N]`` (px) of matches ``points0, points1 [N, 2]`` to
    ``fundamental [3, 3]`` (``x1^T F x0 = 0`` for an exact match)."""
    x0 = np.column_stack([points0, np.ones(len(points0))])
    x1 = np.column_stack([points1, np.ones(len(points1))])
    lines1 = x0 @ fundamental.T  # F x0: epipolar lines in the right image
    lines0 = x1 @ fundamental  # F^T x1: in the left image
    algebraic = np.sum(x1 * lines1, axis=1)
    norm = np.sqrt(lines1[:, 0] ** 2 + lines1[:, 1] ** 2 + lines0[:, 0] ** 2 + lines0[:, 1] ** 2)
    return algebraic / np.maximum(norm, 1e-12)


def rectifying_cameras(points0: np.ndarray, points1: np.ndarray, height: int, width: int
                       ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``K``, ``R0``, ``R1`` that rectify the matches ``points0, points1 [N, 2]`` of two
    ``height x width`` images (the fit of the module docstring, started from parallel cameras
    and ``f = W + H``)."""
    from scipy.optimize import least_squares  # scipy is a dependency; imported where used

    def residuals(parameters: np.ndarray) -> np.ndarray:
        k, r0, r1 = _cameras(parameters, height, width)
        k_inverse = np.linalg.inv(k)
        prior = math.sqrt(len(points0)) * np.append(parameters[:5] / PRIOR_RADIANS,
                                                    parameters[5] / PRIOR_FOCAL_POWER)
        return np.concatenate([sampson_distances(k_inverse.T @ r1.T @ _E1 @ r0 @ k_inverse,
                                                 points0, points1), prior])

    fit = least_squares(residuals, np.zeros(6), loss="soft_l1", f_scale=RANSAC_PX,
                        method="trf", x_scale=np.full(6, 0.1))
    return _cameras(fit.x, height, width)


def apply_homography(homography: np.ndarray, points: np.ndarray) -> np.ndarray:
    """``points [..., 2]`` (pixel ``(x, y)``) mapped by ``homography [3, 3]``."""
    flat = points.reshape(-1, 2)
    mapped = np.column_stack([flat, np.ones(len(flat))]) @ homography.T
    return (mapped[:, :2] / mapped[:, 2:]).reshape(points.shape)


def rectify_uncalibrated(left: np.ndarray, right: np.ndarray) -> UncalibratedRectification:
    """Rectify two photographs of one scene, ``left`` and ``right`` ``[H, W]`` or
    ``[H, W, 3]`` uint8 of one size, from their own feature matches (module docstring).

    Which photograph is the left one is checked only for a pair kept as it is (a warning when
    nearly all matches lie at negative disparities,
    :func:`crossview.geometry.pair_order.warn_if_swapped`): once the cameras are turned, a turn
    of either about its vertical axis moves all disparities alike and is all but invisible to
    the matches, so their sign does not tell the order. Raises :class:`UserError` for images of
    different sizes or too few matches.
    """
    cv2 = require_opencv()
    if left.shape[:2] != right.shape[:2]:
        raise UserError(f"the two images differ in size: {left.shape[1]}x{left.shape[0]} and "
                        f"{right.shape[1]}x{right.shape[0]} (W x H); rectification without a "
                        "calibration needs two photographs of one size")
    height, width = left.shape[:2]
    points0, points1 = feature_matches(left, right)
    rows_as_given = float(np.median(np.abs(points0[:, 1] - points1[:, 1])))
    if rows_as_given * matching_factor(height, width) <= KEEP_ROWS_PX:
        disparities = points0[:, 0] - points1[:, 0]
        # kept as it is, nothing turned: the sign of the disparities tells the order
        warn_if_swapped(disparities, tolerance=1.0 / matching_factor(height, width))
        low, high = np.percentile(disparities, [1, 99])
        return UncalibratedRectification(left.copy(), right.copy(), np.eye(3), np.eye(3), None,
                                         len(points0), rows_as_given, 0.0,
                                         (float(low), float(high)))
    k, r0, r1 = rectifying_cameras(points0, points1, height, width)
    k_inverse = np.linalg.inv(k)
    rotated0, rotated1 = k @ r0 @ k_inverse, k @ r1 @ k_inverse
    centre = np.array([[(width - 1) / 2, (height - 1) / 2]])
    offset = centre - apply_homography(rotated0, centre)  # keeps the left image's centre in place
    moved0 = apply_homography(rotated0, points0) + offset
    moved1 = apply_homography(rotated1, points1) + offset
    disparities = moved0[:, 0] - moved1[:, 0]
    # parallel cameras see every point at a positive disparity; only a pair whose matches say
    # otherwise (a turn about the vertical axis left in the fit, cameras turned towards each
    # other) is shifted
    shift = min(0.0, float(np.percentile(disparities, DISPARITY_PERCENTILE)
                           - DISPARITY_MARGIN * width))
    left_homography = _translation(*offset[0]) @ rotated0
    right_homography = _translation(offset[0, 0] + shift, offset[0, 1]) @ rotated1
    row_error = float(np.median(np.abs(moved0[:, 1] - moved1[:, 1])))
    if row_error * matching_factor(height, width) > MAX_ROW_ERROR_PX:
        log.warning("after rectification the matches' rows still differ by %.1f px (median; "
                    "%.1f px at the matching size): the pair may not be two views of a static "
                    "scene", row_error, row_error * matching_factor(height, width))
    rectified = [cv2.warpPerspective(np.ascontiguousarray(image), homography, (width, height),
                                     flags=getattr(cv2, f"INTER_{INTERPOLATION.upper()}"),
                                     borderMode=getattr(cv2, f"BORDER_{BORDER.upper()}"))
                 for image, homography in ((left, left_homography), (right, right_homography))]
    low, high = np.percentile(disparities - shift, [1, 99])
    return UncalibratedRectification(
        *rectified, left_homography / left_homography[2, 2],
        right_homography / right_homography[2, 2], float(k[0, 0]), len(points0), row_error,
        shift, (float(low), float(high)))


def _translation(x: float, y: float) -> np.ndarray:
    """The homography ``[3, 3]`` that moves pixels by ``(x, y)``."""
    return np.array([[1.0, 0.0, x], [0.0, 1.0, y], [0.0, 0.0, 1.0]])
