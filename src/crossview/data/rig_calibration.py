"""Full (unrectified) stereo rig calibration: both cameras' intrinsics and distortion and the
pose of the second camera relative to the first, read from a file.

Formats, recognised by their content:

- OpenCV ``FileStorage`` YAML (``%YAML:1.0``, ``!!opencv-matrix``) or JSON, and plain YAML or
  JSON with nested lists, holding ``K1``, ``D1``, ``K2``, ``D2``, ``R``, ``T`` (``M1`` / ``M2``
  are read as ``K1`` / ``K2``, the names of OpenCV's stereo sample) and the image size as
  ``image_size: [W, H]`` (or ``width`` and ``height``);
- KITTI raw ``calib_cam_to_cam.txt``: ``K_02``, ``D_02``, ``R_02``, ``T_02``, ``S_02`` and the
  same for camera ``03`` (each camera's pose relative to camera 0), combined into the pose of
  camera 3 relative to camera 2.

Conventions (OpenCV's ``stereoCalibrate``): ``K`` 3 x 3 pixel intrinsics, ``D`` OpenCV's
distortion coefficients (4, 5, 8, 12 or 14 of them; none: no distortion), ``R`` (3 x 3
rotation) and ``T`` (3, **metres**) map a point from the first camera's frame to the
second's: ``x2 = R x1 + T``.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from crossview.data.calibration import read_key_values
from crossview.errors import UserError

DISTORTION_COUNTS = (0, 4, 5, 8, 12, 14)  # what OpenCV's distortion models take
ROTATION_TOLERANCE = 1e-3  # |R^T R - I| and |det R - 1| beyond this: not a rotation
ALIASES = {"M1": "K1", "M2": "K2"}


@dataclass(frozen=True)
class RigCalibration:
    """A stereo rig: ``K1``, ``K2`` ``[3, 3]`` (px), ``D1``, ``D2`` ``[N]`` (OpenCV's
    distortion coefficients), ``R`` ``[3, 3]`` and ``T`` ``[3]`` (metres; ``x2 = R x1 + T``)
    and the image size ``(H, W)`` the intrinsics are for. Every value is checked
    (:func:`check_rig`); ``source`` names the file in messages."""

    K1: np.ndarray
    D1: np.ndarray
    K2: np.ndarray
    D2: np.ndarray
    R: np.ndarray
    T: np.ndarray
    image_size: tuple[int, int]
    source: str = "the calibration"

    def __post_init__(self) -> None:
        check_rig(self)


def check_rig(rig: RigCalibration) -> None:
    """:class:`UserError` naming ``rig.source`` and the entry for a wrong shape, a value that
    is not finite, intrinsics that are not a pinhole matrix, an ``R`` that is not a rotation, a
    zero ``T`` or a size that is not positive."""
    where = rig.source
    shapes = {"K1": (3, 3), "K2": (3, 3), "R": (3, 3), "T": (3,)}
    for key, shape in shapes.items():
        value = getattr(rig, key)
        if value.shape != shape:
            raise UserError(f"{where}: {key} must be {'x'.join(map(str, shape))}, got shape "
                            f"{'x'.join(map(str, value.shape)) or 'scalar'}")
    for key in ("D1", "D2"):
        value = getattr(rig, key)
        if value.ndim != 1 or value.size not in DISTORTION_COUNTS:
            raise UserError(f"{where}: {key} must hold 4, 5, 8, 12 or 14 distortion "
                            f"coefficients (or none), got shape {value.shape}")
    for key in ("K1", "D1", "K2", "D2", "R", "T"):
        if not np.isfinite(getattr(rig, key)).all():
            raise UserError(f"{where}: {key} holds values that are not finite numbers")
    for key in ("K1", "K2"):
        k = getattr(rig, key)
        if not (k[0, 0] > 0 and k[1, 1] > 0 and np.allclose(k[2], (0, 0, 1))
                and k[1, 0] == 0):
            raise UserError(f"{where}: {key} must be a camera matrix [fx s cx; 0 fy cy; 0 0 1] "
                            f"with positive focal lengths, got {k.tolist()}")
    error = max(np.abs(rig.R.T @ rig.R - np.eye(3)).max(), abs(np.linalg.det(rig.R) - 1))
    if error > ROTATION_TOLERANCE:
        raise UserError(f"{where}: R is not a rotation matrix (|R^T R - I| or |det R - 1| is "
                        f"{error:.3g}, more than {ROTATION_TOLERANCE:g})")
    if not np.linalg.norm(rig.T) > 0:
        raise UserError(f"{where}: T is zero: the two cameras must be apart (a baseline)")
    h, w = rig.image_size
    if h < 1 or w < 1:
        raise UserError(f"{where}: the image size must be positive, got {w}x{h} (W x H)")


def read_rig_calibration(path: str | Path) -> RigCalibration:
    """The rig of an OpenCV / plain YAML or JSON file or a KITTI raw ``calib_cam_to_cam.txt``
    (see the module docstring); :class:`UserError` naming the file for anything else and for a
    missing or malformed entry."""
    path = Path(path)
    entries = read_key_values(path, ":")
    if "K_02" in entries and "R_02" in entries:
        return _kitti(path, entries)
    text = path.read_text(encoding="utf-8-sig")
    values = _opencv_storage(path) if text.lstrip().startswith("%YAML") else _plain(path, text)
    values = {ALIASES.get(key, key): value for key, value in values.items()}
    missing = [key for key in ("K1", "K2", "R", "T") if key not in values]
    if missing:
        raise UserError(f"{path}: not a stereo rig calibration: no {', '.join(missing)} (expected "
                        "K1, D1, K2, D2, R, T and image_size, or a KITTI calib_cam_to_cam.txt)")
    arrays = {key: _array(path, key, values.get(key, [])) for key in
              ("K1", "D1", "K2", "D2", "R", "T")}
    arrays = {key: value.reshape(-1) if key in ("D1", "D2", "T") and value.ndim == 2
              and 1 in value.shape else value for key, value in arrays.items()}
    return RigCalibration(**arrays, image_size=_size(path, values), source=str(path))


def _plain(path: Path, text: str) -> dict[str, object]:
    """The mapping of a plain YAML or JSON file."""
    if path.suffix.lower() == ".json":
        load, errors = json.loads, (ValueError,)
    else:
        try:
            import yaml  # PyYAML, of the `train` extra: only a YAML rig file needs it
        except ImportError:
            raise UserError(f"{path}: reading a YAML calibration needs PyYAML: pip install "
                            "'crossview[train]' (or give the calibration as JSON)") from None
        load, errors = yaml.safe_load, (ValueError, yaml.YAMLError)
    try:
        values = load(text)
    except errors as error:
        raise UserError(f"{path}: not readable as {'JSON' if path.suffix == '.json' else 'YAML'}"
                        f" ({str(error).splitlines()[0]})") from None
    if not isinstance(values, dict):
        raise UserError(f"{path}: a rig calibration file holds a mapping of K1, D1, K2, D2, R, T")
    return values


def _opencv_storage(path: Path) -> dict[str, object]:
    """The entries of an OpenCV ``FileStorage`` YAML file (matrices as arrays, numbers and
    sequences as such)."""
    cv2 = require_opencv()
    storage = cv2.FileStorage(str(path), cv2.FILE_STORAGE_READ)
    try:
        root = storage.root()
        values: dict[str, object] = {}
        for key in root.keys():  # noqa: SIM118 (a cv2.FileNode, not a dict)
            node = root.getNode(key)
            if node.isSeq():
                values[key] = [node.at(i).real() for i in range(node.size())]
            elif node.isReal() or node.isInt():
                values[key] = node.real()
            else:
                matrix = node.mat()
                if matrix is not None:
                    values[key] = matrix
        return values
    finally:
        storage.release()


def require_opencv() -> object:
    """The ``cv2`` module, else a :class:`UserError` naming the extra that installs it."""
    try:
        import cv2  # a core dependency; a broken install gets one clear error
    except ImportError:
        raise UserError("stereo rectification needs OpenCV: pip install "
                        "opencv-python-headless") from None
    return cv2


def _array(path: Path, key: str, value: object) -> np.ndarray:
    try:
        return np.asarray(value, dtype=np.float64)
    except (TypeError, ValueError):
        raise UserError(f"{path}: {key} must be numbers (a matrix as nested lists), got "
                        f"{str(value)[:60]!r}") from None


def _size(path: Path, values: dict[str, object]) -> tuple[int, int]:
    """``(H, W)`` of ``image_size: [W, H]`` or ``width`` / ``height``."""
    if "image_size" in values:
        size = _array(path, "image_size", values["image_size"]).reshape(-1)
        if size.size != 2:
            raise UserError(f"{path}: image_size must be [W, H], got {values['image_size']}")
        width, height = size
    elif "width" in values and "height" in values:
        width, height = (float(_array(path, key, values[key]).reshape(-1)[0])
                         for key in ("width", "height"))
    else:
        raise UserError(f"{path}: no image size: give image_size: [W, H] (or width and height)")
    if not (float(width).is_integer() and float(height).is_integer()):
        raise UserError(f"{path}: the image size must be whole pixels, got {width:g}x{height:g}")
    return int(height), int(width)


def _kitti(path: Path, entries: dict[str, str]) -> RigCalibration:
    """Cameras 02 and 03 of a KITTI raw ``calib_cam_to_cam.txt``: each pose is relative to
    camera 00 (``x_i = R_0i x_0 + T_0i``), so ``R = R_03 R_02^T``, ``T = T_03 - R T_02``."""

    def numbers(key: str, shape: tuple[int, ...]) -> np.ndarray:
        if key not in entries:
            raise UserError(f"{path}: no {key} entry (a KITTI calib_cam_to_cam.txt has one)")
        try:
            values = np.array([float(v) for v in entries[key].split()], np.float64)
        except ValueError:
            raise UserError(f"{path}: {key} must hold numbers, got {entries[key]!r}") from None
        if values.size != int(np.prod(shape)):
            raise UserError(f"{path}: {key} must hold {int(np.prod(shape))} numbers, got "
                            f"{values.size}")
        return values.reshape(shape)

    (k2, d2, r2, t2), (k3, d3, r3, t3) = (
        (numbers(f"K_{c}", (3, 3)), numbers(f"D_{c}", (5,)), numbers(f"R_{c}", (3, 3)),
         numbers(f"T_{c}", (3,))) for c in ("02", "03"))
    width, height = numbers("S_02", (2,))
    rotation = r3 @ r2.T
    return RigCalibration(k2, d2, k3, d3, rotation, t3 - rotation @ t2,
                          _size(path, {"width": width, "height": height}), str(path))
