"""OpenCV StereoSGBM's raw output format: int16 ``disparity * 16``, negative where it gives no
disparity (a hole). The format of the ``sgbm.npy`` files of scene folders and of what
``cv2.StereoSGBM.compute`` returns."""

from __future__ import annotations

import numpy as np

SGBM_SCALE = 16  # OpenCV's StereoSGBM returns disparity * 16 as int16


def disparity_from_sgbm(raw: np.ndarray) -> np.ndarray:
    """OpenCV SGBM's raw int16 output ``[H, W]`` (disparity * 16, negative = no disparity) as
    float32 disparity ``[H, W]`` in pixels with NaN at the holes."""
    return np.where(raw >= 0, raw / SGBM_SCALE, np.nan).astype(np.float32)
