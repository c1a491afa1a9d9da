"""Stereo rectification with OpenCV: an unrectified pair and its rig calibration
(:class:`~crossview.data.rig_calibration.RigCalibration`) become a rectified pair, whose
epipolar lines are image rows, and the rectified calibration depth needs
(:class:`~crossview.data.calibration.StereoCalibration`).

``cv2.stereoRectify`` (with ``CALIB_ZERO_DISPARITY``: both principal points at one x, so
``doffs`` is 0) gives each camera's rectifying rotation and new projection;
``cv2.initUndistortRectifyMap`` and ``cv2.remap`` (bilinear) resample both images, removing the
lens distortion on the way. ``alpha`` chooses the new field of view: 0 keeps only pixels valid
in both images (no black borders), 1 keeps every source pixel. The rectified projections
``P1 = [f 0 cx 0; 0 f cy 0; 0 0 1 0]`` and ``P2`` (``P2[0, 3] = -f * baseline``) give the
focal length, the principal point and the baseline (in the unit of ``T``: metres).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from crossview.data.calibration import StereoCalibration
from crossview.data.rig_calibration import RigCalibration, require_opencv
from crossview.errors import UserError


@dataclass(frozen=True)
class RectifiedPair:
    """``left``, ``right``: the rectified images ``[H, W, C]`` (the input dtype);
    ``calibration``: their rectified calibration (focal and principal point in px, baseline in
    metres, ``doffs`` 0, the image size)."""

    left: np.ndarray
    right: np.ndarray
    calibration: StereoCalibration


def rectify_pair(left: np.ndarray, right: np.ndarray, rig: RigCalibration, *,
                 alpha: float = 0.0) -> RectifiedPair:
    """Rectify ``left`` and ``right`` (``[H, W]`` or ``[H, W, C]``, the size ``rig`` is for).

    Raises :class:`UserError` for images of another size than the calibration's (naming both),
    a rig whose second camera is not to the right of the first, an ``alpha`` outside [0, 1] or
    a missing OpenCV.
    """
    cv2 = require_opencv()
    if not 0 <= alpha <= 1:
        raise UserError(f"alpha must be in [0, 1] (0: only valid pixels, 1: all), got {alpha:g}")
    h, w = rig.image_size
    for name, image in (("left", left), ("right", right)):
        if image.shape[:2] != (h, w):
            raise UserError(f"the {name} image is {image.shape[1]}x{image.shape[0]} but "
                            f"{rig.source} is for {w}x{h} images (W x H)")
    r1, r2, p1, p2, *_ = cv2.stereoRectify(
        rig.K1, _distortion(rig.D1), rig.K2, _distortion(rig.D2), (w, h), rig.R,
        rig.T.reshape(3, 1), flags=cv2.CALIB_ZERO_DISPARITY, alpha=alpha)
    if abs(p2[1, 3]) > abs(p2[0, 3]):
        raise UserError(f"{rig.source}: the cameras are above each other (T = {rig.T.tolist()}); "
                        "crossview stereo matches along rows: give a side-by-side rig")
    if p2[0, 3] > 0:
        raise UserError(f"{rig.source}: the second camera is left of the first (T = "
                        f"{rig.T.tolist()}); give the left image first")
    rectified = []
    for image, k, d, r, p in ((left, rig.K1, rig.D1, r1, p1), (right, rig.K2, rig.D2, r2, p2)):
        map_x, map_y = cv2.initUndistortRectifyMap(k, _distortion(d), r, p, (w, h),
                                                   cv2.CV_32FC1)
        rectified.append(cv2.remap(image, map_x, map_y, cv2.INTER_LINEAR,
                                   borderMode=cv2.BORDER_CONSTANT))
    focal = float(p1[0, 0])
    calibration = StereoCalibration(
        focal=focal, baseline=abs(float(p2[0, 3])) / focal, doffs=float(p2[0, 2] - p1[0, 2]),
        cx=float(p1[0, 2]), cy=float(p1[1, 2]), image_size=(h, w))
    return RectifiedPair(*rectified, calibration)


def _distortion(coefficients: np.ndarray) -> np.ndarray | None:
    """OpenCV's distortion argument: ``None`` for no coefficients."""
    return coefficients if coefficients.size else None
