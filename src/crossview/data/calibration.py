"""Rectified stereo calibration: the one place crossview reads calibration files.

Two release formats are read, recognised by their content, not their name:

- Middlebury (2005-2021) and ETH3D ``calib.txt``: ``key=value`` lines,
  ``cam0=[f 0 cx; 0 f cy; 0 0 1]``, ``cam1=[...]``, ``doffs=`` (the x-difference of the
  principal points, ``cx1 - cx0``), ``baseline=`` in millimetres, optionally ``width=``,
  ``height=``, ``ndisp=``.
- KITTI ``calib_cam_to_cam.txt``: ``key: numbers`` lines; the rectified projections of the
  colour cameras ``P_rect_02``/``P_rect_03`` (3 x 4, row-major) give the focal length,
  principal point and baseline (``P[0, 3] = fx * tx``; the baseline is ``tx_02 - tx_03``,
  metres), ``S_rect_02`` the rectified image size.

A :class:`StereoCalibration` holds what depth needs, in metres:
``depth = focal * baseline / (disparity + doffs)``.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from crossview.errors import UserError

KITTI_CAMERAS = ("02", "03")
# a calibration rescales to images whose width and height scale alike to within this
ASPECT_TOLERANCE = 0.01  # the colour pair of the KITTI stereo benchmarks
_MIDDLEBURY_MATRIX = re.compile(r"^\[(.*)\]$")


@dataclass(frozen=True)
class StereoCalibration:
    """A rectified pair's calibration: focal length ``focal`` (px), ``baseline`` (metres),
    ``doffs`` (px, the right principal point's x minus the left's), the left principal point
    ``cx``, ``cy`` (px; ``None``: the image centre) and the image size it is for
    (``image_size = (H, W)``, ``None`` if the file does not say).

    >>> StereoCalibration(focal=700.0, baseline=0.5).depth_scale
    350.0
    """

    focal: float
    baseline: float
    doffs: float = 0.0
    cx: float | None = None
    cy: float | None = None
    image_size: tuple[int, int] | None = None

    def __post_init__(self) -> None:
        for name in ("focal", "baseline"):
            value = getattr(self, name)
            if not (math.isfinite(value) and value > 0):
                raise UserError(f"the {name} must be a positive number, got {value:g}")
        for name in ("doffs", "cx", "cy"):
            value = getattr(self, name)
            if value is not None and not math.isfinite(value):
                raise UserError(f"{name} must be a finite number, got {value}")

    @property
    def depth_scale(self) -> float:
        """``focal * baseline`` (px * metres): depth is this over ``disparity + doffs``."""
        return self.focal * self.baseline

    def principal_point(self, height: int, width: int) -> tuple[float, float]:
        """``(cx, cy)`` in px; the centre of an ``height x width`` image where not given."""
        cx = (width - 1) / 2 if self.cx is None else self.cx
        cy = (height - 1) / 2 if self.cy is None else self.cy
        return cx, cy

    def for_size(self, height: int, width: int, source: str) -> StereoCalibration:
        """This calibration for ``height x width`` images: itself when it is for that size (or
        says no size), else rescaled to it as for a resized copy of the calibrated images:
        the focal length, ``cx`` and ``doffs`` scale with the width, ``cy`` with the height
        (pixel centres kept: ``c' = (c + 0.5) s - 0.5``), the baseline stays. A
        :class:`UserError` naming ``source`` when the images are not a scaled copy (their
        aspect ratio differs by more than :data:`ASPECT_TOLERANCE`).

        >>> half = StereoCalibration(500.0, 0.1, 2.0, 99.5, 49.5, (100, 200)).for_size(50, 100, "c")
        >>> half.focal, half.doffs, half.cx, half.cy
        (250.0, 1.0, 49.5, 24.5)
        """
        if self.image_size is None or self.image_size == (height, width):
            return self
        h, w = self.image_size
        sx, sy = width / w, height / h
        if abs(sx / sy - 1) > ASPECT_TOLERANCE:
            raise UserError(f"{source} is for {w}x{h} px images but the images are {width}x"
                            f"{height} (W x H), not a scaled copy (the aspect ratio differs); "
                            "calibrate the resolution you run at")
        cx, cy = ((None if c is None else (c + 0.5) * s - 0.5)
                  for c, s in ((self.cx, sx), (self.cy, sy)))
        return StereoCalibration(self.focal * sx, self.baseline, self.doffs * sx, cx, cy,
                                 (height, width))


def read_key_values(path: Path, separator: str = "=") -> dict[str, str]:
    """``{key: value string}`` of the ``key SEPARATOR value`` lines of a text file (other lines
    are skipped); :class:`UserError` for a missing or binary file."""
    path = Path(path)
    if not path.is_file():
        raise UserError(f"{path}: no such file" if not path.exists() else f"{path}: not a file")
    try:  # utf-8-sig: editors on Windows start a UTF-8 file with a byte-order mark
        text = path.read_text(encoding="utf-8-sig")
    except UnicodeDecodeError:
        raise UserError(f"{path}: not a text file (a calibration file holds key/value "
                        "lines)") from None
    entries = {}
    for line in text.splitlines():
        key, sep, value = line.partition(separator)
        if sep and key.strip():
            entries[key.strip()] = value.strip()
    return entries


def read_stereo_calibration(path: str | Path) -> StereoCalibration:
    """The calibration of a Middlebury/ETH3D ``calib.txt`` or a KITTI
    ``calib_cam_to_cam.txt`` (told apart by their keys); :class:`UserError` naming the file for
    anything else, or a file of the right kind with a missing or malformed entry."""
    path = Path(path)
    middlebury = read_key_values(path, "=")
    if "cam0" in middlebury:
        return _middlebury(path, middlebury)
    kitti = read_key_values(path, ":")
    if f"P_rect_{KITTI_CAMERAS[0]}" in kitti:
        return _kitti(path, kitti)
    rig = " (an unrectified rig's K1, D1, K2, D2, R, T: rectify the pair first with " \
        "`crossview rectify LEFT RIGHT --calib FILE`)" if "R" in kitti and "T" in kitti else ""
    raise UserError(f"{path}: not a stereo calibration file: expected a Middlebury/ETH3D "
                    "calib.txt (cam0=, cam1=, baseline= lines) or a KITTI calib_cam_to_cam.txt "
                    f"(P_rect_02:, P_rect_03: lines){rig}")


def _numbers(path: Path, key: str, text: str, count: int) -> np.ndarray:
    """``count`` numbers of the entry ``key`` (separated by spaces, commas or semicolons)."""
    try:
        values = np.array([float(v) for v in re.split(r"[\s,;]+", text.strip()) if v], float)
    except ValueError:
        raise UserError(f"{path}: {key} must hold {count} numbers, got {text!r}") from None
    if values.size != count or not np.isfinite(values).all():
        raise UserError(f"{path}: {key} must hold {count} finite numbers, got {text!r}")
    return values


def _entry(path: Path, entries: dict[str, str], key: str, kind: str) -> str:
    if key not in entries:
        raise UserError(f"{path}: no {key} entry (a {kind} calibration file has one)")
    return entries[key]


def _middlebury(path: Path, entries: dict[str, str]) -> StereoCalibration:
    """Middlebury ``cam0``/``cam1`` matrices (``[a b c; d e f; g h i]``), ``baseline`` (mm)."""
    cameras = []
    for key in ("cam0", "cam1"):
        text = _entry(path, entries, key, "Middlebury")
        inside = _MIDDLEBURY_MATRIX.match(text)
        if inside is None:
            raise UserError(f"{path}: {key} must look like [f 0 cx; 0 f cy; 0 0 1], got {text!r}")
        cameras.append(_numbers(path, key, inside.group(1), 9).reshape(3, 3))
    (left, right) = cameras
    baseline_mm = _numbers(path, "baseline", _entry(path, entries, "baseline", "Middlebury"), 1)
    doffs = (_numbers(path, "doffs", entries["doffs"], 1)[0] if "doffs" in entries
             else right[0, 2] - left[0, 2])
    size = None
    if "width" in entries and "height" in entries:
        (width,), (height,) = (_numbers(path, key, entries[key], 1) for key in ("width", "height"))
        size = _image_size(path, "width and height", width, height)
    return _calibration(path, left[0, 0], baseline_mm[0] / 1000.0, doffs, left[0, 2],
                        left[1, 2], size)


def _kitti(path: Path, entries: dict[str, str]) -> StereoCalibration:
    """KITTI rectified projections ``P_rect_02``/``P_rect_03`` (3 x 4) and ``S_rect_02``."""
    first, second = (
        _numbers(path, f"P_rect_{c}", _entry(path, entries, f"P_rect_{c}", "KITTI"), 12)
        .reshape(3, 4) for c in KITTI_CAMERAS)
    focal = first[0, 0]
    if focal <= 0 or second[0, 0] <= 0:
        raise UserError(f"{path}: the focal lengths of P_rect_02 and P_rect_03 must be "
                        f"positive, got {first[0, 0]:g} and {second[0, 0]:g}")
    baseline = first[0, 3] / first[0, 0] - second[0, 3] / second[0, 0]
    size = None
    if f"S_rect_{KITTI_CAMERAS[0]}" in entries:
        width, height = _numbers(path, "S_rect_02", entries[f"S_rect_{KITTI_CAMERAS[0]}"], 2)
        size = _image_size(path, "S_rect_02", width, height)
    return _calibration(path, focal, baseline, second[0, 2] - first[0, 2], first[0, 2],
                        first[1, 2], size)


def _image_size(path: Path, key: str, width: float, height: float) -> tuple[int, int]:
    """``(H, W)`` of a size entry: whole positive numbers (KITTI writes them as floats,
    ``1.242000e+03``); a fraction would be cut to another size than the file means."""
    if not all(value.is_integer() and value > 0 for value in (width, height)):
        raise UserError(f"{path}: {key} must be whole positive numbers of pixels, got "
                        f"{width:g} and {height:g}")
    return int(height), int(width)


def _calibration(path: Path, focal: float, baseline: float, doffs: float, cx: float,
                 cy: float, size: tuple[int, int] | None) -> StereoCalibration:
    """The :class:`StereoCalibration`, its value errors naming ``path``."""
    try:
        return StereoCalibration(float(focal), float(baseline), float(doffs), float(cx),
                                 float(cy), size)
    except UserError as error:
        raise UserError(f"{path}: {error}") from None


def write_stereo_calibration(path: str | Path, calibration: StereoCalibration) -> None:
    """Write ``calibration`` (with its image size and principal point) at ``path`` as a
    Middlebury ``calib.txt`` (baseline in millimetres), which :func:`read_stereo_calibration`
    and ``crossview stereo --calib`` read back. Not atomic by itself: the caller stages it
    (:func:`crossview.output.staged_files`)."""
    cal = calibration
    if cal.image_size is None or cal.cx is None or cal.cy is None:
        raise ValueError("a calib.txt needs the image size and the principal point")
    h, w = cal.image_size

    def camera(cx: float) -> str:
        return f"[{cal.focal!r} 0 {cx!r}; 0 {cal.focal!r} {cal.cy!r}; 0 0 1]"

    Path(path).write_text(f"cam0={camera(cal.cx)}\ncam1={camera(cal.cx + cal.doffs)}\n"
                          f"doffs={cal.doffs!r}\nbaseline={cal.baseline * 1000.0!r}\n"
                          f"width={w}\nheight={h}\n")
