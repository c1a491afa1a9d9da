"""The fused default stereo model (``crossview stereo``'s answer) from an exported ONNX file,
with numpy, OpenCV and onnxruntime only.

:class:`FusedStereo` runs what :func:`crossview.models.dense.inference.predict_fields` runs
for a fusing stereo model, with the same functions wherever they are not the network:

1. a pair of more pixels than the model fuses whole is shrunk to the file's working size
   by torch's antialiased bilinear weights, written in numpy
   (:func:`~crossview.runtime.antialiased_shrink.antialiased_shrink`; torch sums them in
   float32, this in float64: within 0.005 grey levels);
2. the right image's rows lined up with the left's
   (:func:`~crossview.models.dense.vertical_alignment.measure_rows`,
   :func:`~crossview.models.dense.vertical_alignment.rows_shifted`);
3. the network, resizing to its size and back inside: the ONNX file, in onnxruntime;
4. the SGBM fusion of both views
   (:func:`~crossview.models.dense.sgbm_fusion.fused_disparities`);
5. the right view's disparity moved back to the right image's rows, and both enlarged back
   to the pair's size when it ran at a working size (bilinear, values times the widths'
   ratio).

Example (a file exported at the pair's size)::

    stereo = FusedStereo("matchstereo-hybrid-375x450.onnx")
    result = stereo("left.png", "right.png")
    result.left  # [375, 450] float32 px
"""

from __future__ import annotations

import os
from typing import NamedTuple

import numpy as np

from crossview.data.image_arrays import as_uint8
from crossview.geometry.pair_order import warn_if_swapped
from crossview.models.dense.classical import require_cv2
from crossview.models.dense.sgbm_fusion import fused_disparities
from crossview.models.dense.vertical_alignment import (
    NOTED_OFFSET_PX,
    measure_rows,
    rows_shifted,
)
from crossview.runtime.antialiased_shrink import antialiased_shrink
from crossview.runtime.fused_file import FusedFile
from crossview.runtime.images import ImageInput, network_input, read_pair
from crossview.runtime.session import onnx_session


class StereoResult(NamedTuple):
    """What :class:`FusedStereo` returns: both views' disparities ``[H, W]`` float32 px
    (positive; left ``(x, y)`` matches right ``(x - left[y, x], y)``), and the offset (px)
    the right image's rows were lined up by (0.0: none)."""

    left: np.ndarray
    right: np.ndarray
    row_offset: float


class FusedStereo:
    """A fused stereo file (``crossview export onnx`` of a stereo model that fuses, e.g.
    ``matchstereo-hybrid``) ready to run: ``FusedStereo(path, threads=0)`` (onnxruntime's
    intra-op threads; 0: its default), then ``stereo(left, right)`` on paths or RGB uint8
    ``[H, W, 3]`` arrays of the file's :attr:`size`. A :class:`crossview.errors.UserError`
    for a file that is no fused stereo file or images it does not take."""

    def __init__(self, path: str | os.PathLike[str], threads: int = 0) -> None:
        self.session = onnx_session(path, threads)
        self.file = FusedFile.read(self.session.get_modelmeta().custom_metadata_map, str(path))

    @property
    def size(self) -> tuple[int, int]:
        """``(H, W)`` of the pairs the file takes."""
        return self.file.size

    def __call__(self, left: ImageInput, right: ImageInput) -> StereoResult:
        image0, image1 = read_pair(left, right, self.file.size)
        x0, x1 = network_input(image0), network_input(image1)
        if self.file.working_size != self.file.size:
            x0, x1 = (antialiased_shrink(x, self.file.working_size) for x in (x0, x1))
        offset = self._row_offset(x0, x1)
        if offset:
            x1 = rows_shifted(x1, np.array([offset], np.float32))
        field = self.session.run(["field"], {"image0": x0, "image1": x1})[0]
        left_view, right_view = fused_disparities(
            [as_uint8(_hwc(x0))], [as_uint8(_hwc(x1))], field, runs=self.file.runs,
            medians=self.file.medians).disparity
        if offset:
            right_view = rows_shifted(right_view[None, None],
                                      np.array([-offset], np.float32))[0, 0]
        if self.file.working_size != self.file.size:
            left_view, right_view = (_enlarged(view, self.file.size)
                                     for view in (left_view, right_view))
        return StereoResult(left_view, right_view, float(offset))

    def _row_offset(self, x0: np.ndarray, x1: np.ndarray) -> np.float32:
        """The offset (px, float32 as the torch path holds it) that the right image's rows are
        lined up by: :func:`measure_rows`'s where it reaches the file's ``align_px``, else 0."""
        if self.file.align_px is None:
            return np.float32(0)
        measure = measure_rows(as_uint8(_hwc(x0)), as_uint8(_hwc(x1)))
        warn_if_swapped(measure.disparities, tolerance=NOTED_OFFSET_PX)  # as crossview stereo
        offset = np.float32(measure.offset)
        return offset if abs(offset) >= self.file.align_px else np.float32(0)


def _hwc(x: np.ndarray) -> np.ndarray:
    """``[1, 3, H, W]`` back to ``[H, W, 3]``."""
    return x[0].transpose(1, 2, 0)


def _enlarged(disparity: np.ndarray, size: tuple[int, int]) -> np.ndarray:
    """A disparity ``[h, w]`` px enlarged to ``size = (H, W)`` (bilinear, half-pixel centres as
    torch's ``align_corners=False``), its values times ``W / w``."""
    opencv = require_cv2("resizing")
    gain = np.float32(size[1] / disparity.shape[1])
    return opencv.resize(disparity, (size[1], size[0]), interpolation=opencv.INTER_LINEAR) * gain
