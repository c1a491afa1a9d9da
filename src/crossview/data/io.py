"""Read and write the file formats of stereo and optical-flow benchmarks, on numpy arrays.

=====================  ==========================================  ============================
format                 reader -> returns                           writer
=====================  ==========================================  ============================
image (PNG, JPEG, ..)  :func:`read_image` -> ``[H, W, 3]`` uint8    :func:`write_image`
PFM                    :func:`read_pfm` -> ``[H, W]``/``[H, W, 3]``  :func:`write_pfm`
                       float32
Middlebury ``.flo``    :func:`read_flo` -> ``[H, W, 2]`` float32    :func:`write_flo`
KITTI disparity PNG    :func:`read_kitti_disparity` -> ``(disp      :func:`write_kitti_disparity`
                       [H, W] float32, valid [H, W] bool)``
KITTI flow PNG         :func:`read_kitti_flow` -> ``(flow           :func:`write_kitti_flow`
                       [H, W, 2] float32, valid [H, W] bool)``
16-bit PNG             :func:`read_png16` -> uint16 ``[H, W(, C)]``   :func:`write_png16`
``.npy``               :func:`read_npy` -> the stored array        :func:`write_npy`
=====================  ==========================================  ============================

:func:`read` dispatches on the file type and returns the file's natural content (images as
RGB uint8, 16-bit PNGs as raw uint16; the KITTI interpretation of a 16-bit PNG needs the
explicit KITTI readers). Every reader raises :class:`~crossview.errors.UserError` naming the
file for a missing, truncated or malformed file; sizes in headers are checked against the file
size before anything is allocated. Every writer writes to a temporary name in the target's
directory and then renames it, so a failed write leaves no partial file.
"""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import BinaryIO

import numpy as np
from numpy.lib import format as npy_format
from PIL import Image, ImageOps

from crossview import memory
from crossview.data import png
from crossview.errors import UserError
from crossview.output import atomic_output

PathLike = str | os.PathLike[str]

FLO_MAGIC = 202021.25  # b"PIEH" read as a little-endian float32
FLO_UNKNOWN = 1e9  # Middlebury .flo: |u| or |v| above this marks unknown flow
KITTI_FLOW_OFFSET = 2**15
KITTI_FLOW_SCALE = 64.0
KITTI_DISPARITY_SCALE = 256.0
NPY_MAGIC = b"\x93NUMPY"
IMAGE_SUFFIXES = (".png", ".jpg", ".jpeg", ".bmp", ".ppm", ".pgm", ".tif", ".tiff", ".webp")


# ----------------------------------------------------------------------------- helpers


def _require_file(path: PathLike) -> Path:
    path = Path(path)
    if not path.is_file():
        raise UserError(f"{path}: no such file" if not path.exists() else f"{path}: not a file")
    return path


def _read_bytes(path: PathLike) -> bytes:
    return _require_file(path).read_bytes()


def _write_bytes(path: PathLike, data: bytes) -> None:
    with atomic_output(path) as tmp:
        tmp.write_bytes(data)


def _check_array(name: str, array: np.ndarray, ndim: tuple[int, ...], channels: tuple[int, ...]
                 ) -> None:
    if not isinstance(array, np.ndarray):
        raise TypeError(f"{name} must be a numpy array, got {type(array).__name__}")
    if array.ndim not in ndim or (array.ndim == 3 and array.shape[2] not in channels) or (
        0 in array.shape
    ):
        raise ValueError(f"{name} has an unsupported shape: {array.shape=}")


# ----------------------------------------------------------------------------- images


def _declares_16_bits(image: Image.Image) -> bool:
    """Whether an integer-mode Pillow image comes from a file of at most 16 bits per sample.

    Pillow opens every such file in mode "I;16*" or "I" (32-bit): a PNG or PGM/PPM holds at
    most 16 bits (Pillow scales a PGM's maxval to 16 bits), a TIFF says it in BitsPerSample.
    """
    if image.mode.startswith("I;16") or image.format in ("PNG", "PPM"):
        return True
    if image.format == "TIFF":
        return max(image.tag_v2.get(258, (32,))) <= 16
    return False


def _integer_grey(values: np.ndarray, sixteen_bits: bool, path: PathLike) -> np.ndarray:
    """uint8 ``[H, W]`` from the integer samples ``values`` ``[H, W]`` of ``path``: the high
    byte of 16 bits, or, for a 32-bit image, the smallest of 8 and 16 bits that holds them."""
    if not sixteen_bits:
        if values.min() < 0 or values.max() > 0xFFFF:
            raise UserError(f"{path}: 32-bit integer image with values in "
                            f"[{values.min()}, {values.max()}], expected 0..65535 (8 or 16 bits)")
        if values.max() <= 0xFF:
            return values.astype(np.uint8)
    return (values >> 8).astype(np.uint8)


def read_image(path: PathLike) -> np.ndarray:
    """Read an image file as RGB: returns ``[H, W, 3]`` uint8.

    The scale follows the file's bit depth: 8-bit images are returned as stored, 16-bit images
    (PNG, PGM/PPM, 16-bit TIFF) keep their high byte (``v >> 8``), so small values in a 16-bit
    file read as dark. A 32-bit integer image declares no white level: it is read by the
    smallest of the 8- and 16-bit ranges that holds its values (as stored when all are at most
    255, else the high byte of 16 bits); negative values or values above 65535 are an error.
    Grayscale is repeated over the three channels, palette images are expanded through their
    palette, and an alpha channel is dropped (not composited). An EXIF orientation (a phone
    photograph stored sideways) is applied: the image is returned upright, as viewers show it.
    """
    _require_file(path)
    try:
        with Image.open(path) as opened:
            opened.load()
            image = ImageOps.exif_transpose(opened)  # upright, as viewers show it
            if image.mode.startswith("I;16") or image.mode == "I":
                grey = _integer_grey(np.asarray(image).astype(np.int64),
                                     _declares_16_bits(image), path)
                return np.repeat(grey[..., None], 3, axis=2)
            if image.mode == "F":
                raise UserError(f"{path}: floating-point image, expected 8 or 16 bits")
            return np.array(image.convert("RGB"), dtype=np.uint8)
    except UserError:
        raise
    except (OSError, ValueError, SyntaxError, Image.DecompressionBombError) as error:
        raise UserError(f"{path}: cannot read image ({error})") from None


def write_image(path: PathLike, image: np.ndarray) -> None:
    """Write ``[H, W, 3]`` (or ``[H, W]``) uint8 to an image file; the suffix picks the format."""
    _check_array("image", image, (2, 3), (3,))
    if image.dtype != np.uint8:
        raise TypeError(f"image must be uint8, got {image.dtype=}")
    with atomic_output(path) as tmp:
        Image.fromarray(image).save(tmp)


# ----------------------------------------------------------------------------- PFM

_PFM_HEADER = re.compile(rb"\A(P[Ff])\s+(\d+)\s+(\d+)\s+(\S+?)(?:[ \t]*\r?\n|\s)")


def read_pfm(path: PathLike) -> np.ndarray:
    """Read a PFM file: returns ``[H, W]`` ("Pf") or ``[H, W, 3]`` ("PF") float32.

    The header is ``PF``/``Pf``, width and height, then a scale whose sign gives the byte order
    (negative = little endian); rows are stored bottom-to-top and returned top-to-bottom.
    Non-finite values are returned as stored (Middlebury marks unknown disparity with inf).
    Bytes after the pixel data are ignored.
    """
    data = _read_bytes(path)
    match = _PFM_HEADER.match(data[:256])
    if match is None:
        raise UserError(f"{path}: not a PFM file (expected a 'PF' or 'Pf' header)")
    channels = 3 if match.group(1) == b"PF" else 1
    width, height = int(match.group(2)), int(match.group(3))
    try:
        scale = float(match.group(4))
    except ValueError:
        raise UserError(f"{path}: malformed PFM scale {match.group(4)!r}") from None
    if not np.isfinite(scale) or scale == 0:
        raise UserError(f"{path}: malformed PFM scale {scale} (must be finite and non-zero)")
    needed = width * height * channels * 4
    available = len(data) - match.end()
    if width == 0 or height == 0 or needed > available:
        raise UserError(
            f"{path}: truncated or corrupt PFM (header says {width}x{height}x{channels} floats "
            f"= {needed} bytes, file holds {available})"
        )
    dtype = "<f4" if scale < 0 else ">f4"
    values = np.frombuffer(data, dtype, count=width * height * channels, offset=match.end())
    values = values.reshape(height, width, channels)[::-1].astype(np.float32)
    return values[..., 0] if channels == 1 else values


def write_pfm(path: PathLike, array: np.ndarray, *, little_endian: bool = True) -> None:
    """Write ``[H, W]``, ``[H, W, 1]`` or ``[H, W, 3]`` values as float32 PFM (bottom-to-top)."""
    _check_array("array", array, (2, 3), (1, 3))
    values = np.asarray(array, np.float32)
    channels = 3 if values.ndim == 3 and values.shape[2] == 3 else 1
    values = values.reshape(values.shape[0], values.shape[1], channels)
    header = f"{'PF' if channels == 3 else 'Pf'}\n{values.shape[1]} {values.shape[0]}\n"
    header += "-1.0\n" if little_endian else "1.0\n"
    body = np.ascontiguousarray(values[::-1], "<f4" if little_endian else ">f4").tobytes()
    _write_bytes(path, header.encode("ascii") + body)


# ----------------------------------------------------------------------------- .flo


def read_flo(path: PathLike) -> np.ndarray:
    """Read a Middlebury ``.flo`` file: returns flow ``[H, W, 2]`` float32, (u, v) in pixels.

    Layout: float32 magic 202021.25, int32 width, int32 height, then row-major interleaved
    (u, v) float32, all little endian. Values above :data:`FLO_UNKNOWN` in magnitude mark
    unknown flow and are returned as stored; NaN is not part of the format and is an error.
    """
    data = _read_bytes(path)
    if len(data) < 12 or np.frombuffer(data, "<f4", count=1)[0] != FLO_MAGIC:
        raise UserError(f"{path}: not a .flo file (wrong magic number, expected 202021.25)")
    width, height = (int(v) for v in np.frombuffer(data, "<i4", count=2, offset=4))
    needed = 12 + 8 * width * height if width > 0 and height > 0 else -1
    if needed != len(data):
        raise UserError(
            f"{path}: truncated or corrupt .flo (header says {width}x{height}, which needs "
            f"{needed} bytes; the file has {len(data)})"
        )
    flow = np.frombuffer(data, "<f4", offset=12).reshape(height, width, 2).astype(np.float32)
    if np.isnan(flow).any():
        raise UserError(f"{path}: .flo file contains NaN (unknown flow is stored as > 1e9)")
    return flow


def write_flo(path: PathLike, flow: np.ndarray) -> None:
    """Write flow ``[H, W, 2]`` (u, v) as a Middlebury ``.flo`` file; NaN is refused."""
    _check_array("flow", flow, (3,), (2,))
    values = np.asarray(flow, "<f4")
    if np.isnan(values).any():
        raise ValueError("flow contains NaN, which .flo cannot mark; use a value > 1e9")
    header = np.array([FLO_MAGIC], "<f4").tobytes()
    header += np.array([values.shape[1], values.shape[0]], "<i4").tobytes()
    _write_bytes(path, header + np.ascontiguousarray(values).tobytes())


# ----------------------------------------------------------------------------- 16-bit PNG


def read_png16(path: PathLike) -> np.ndarray:
    """Read a 16-bit PNG losslessly: returns uint16 ``[H, W]`` (grey) or ``[H, W, C]``."""
    data = _read_bytes(path)
    pixels = png.decode(data, str(path))
    if pixels.dtype != np.uint16:
        raise UserError(f"{path}: expected a 16-bit PNG, got an 8-bit one")
    return pixels


def write_png16(path: PathLike, array: np.ndarray) -> None:
    """Write uint16 ``[H, W]`` or ``[H, W, C]`` (C in 1..4) as a 16-bit PNG, losslessly."""
    _check_array("array", array, (2, 3), (1, 2, 3, 4))
    if array.dtype != np.uint16:
        raise TypeError(f"array must be uint16, got {array.dtype=}")
    _write_bytes(path, png.encode(array))


# ----------------------------------------------------------------------------- KITTI


def read_kitti_disparity(path: PathLike) -> tuple[np.ndarray, np.ndarray]:
    """Read a KITTI disparity PNG: returns ``(disparity [H, W] float32, valid [H, W] bool)``.

    The file is a 16-bit grey PNG holding ``disparity * 256``; 0 means no ground truth.
    Invalid pixels get disparity 0.
    """
    raw = read_png16(path)
    if raw.ndim != 2:
        raise UserError(f"{path}: a KITTI disparity map is a 1-channel PNG, got {raw.shape[2]}")
    valid = raw > 0
    return (raw / KITTI_DISPARITY_SCALE).astype(np.float32), valid


def write_kitti_disparity(path: PathLike, disparity: np.ndarray,
                          valid: np.ndarray | None = None) -> None:
    """Write ``disparity [H, W]`` as a KITTI disparity PNG (``round(d * 256)``, 0 = invalid).

    ``valid`` defaults to ``disparity > 0``. Valid values, rounded to 1/256 px, must lie in
    ``[0, 65535 / 256]``; a valid value that rounds to 0 is stored as 1 (1/256 px) so it stays
    valid.
    """
    _check_array("disparity", disparity, (2,), ())
    valid = disparity > 0 if valid is None else np.asarray(valid, bool)
    if valid.shape != disparity.shape:
        raise ValueError(f"valid must match disparity: {valid.shape=}, {disparity.shape=}")
    scaled = np.rint(np.where(valid, np.asarray(disparity, np.float64) * KITTI_DISPARITY_SCALE, 0))
    if np.isnan(scaled).any() or scaled.min() < 0 or scaled.max() > 0xFFFF:
        raise ValueError("valid disparities must be finite and within [0, 65535 / 256 = 255.996] "
                         "to fit KITTI PNG")
    raw = np.where(valid, np.maximum(scaled, 1), 0).astype(np.uint16)
    write_png16(path, raw)


def read_kitti_flow(path: PathLike) -> tuple[np.ndarray, np.ndarray]:
    """Read a KITTI flow PNG: returns ``(flow [H, W, 2] float32, valid [H, W] bool)``.

    The file is a 16-bit RGB PNG with R = ``u * 64 + 2**15``, G = ``v * 64 + 2**15`` and
    B = 1 where the flow is valid, 0 elsewhere. Invalid pixels get flow 0.
    """
    raw = read_png16(path)
    if raw.ndim != 3 or raw.shape[2] != 3:
        raise UserError(f"{path}: a KITTI flow map is a 3-channel 16-bit PNG, got {raw.shape}")
    valid = raw[..., 2] > 0
    flow = (raw[..., :2].astype(np.float32) - KITTI_FLOW_OFFSET) / KITTI_FLOW_SCALE
    return np.where(valid[..., None], flow, 0).astype(np.float32), valid


def write_kitti_flow(path: PathLike, flow: np.ndarray, valid: np.ndarray | None = None) -> None:
    """Write ``flow [H, W, 2]`` as a KITTI flow PNG (see :func:`read_kitti_flow`).

    ``valid`` defaults to all-finite pixels. Valid components must lie in ``[-512, 511.98]``
    (they are rounded to 1/64 px); invalid pixels are stored as zeros.
    """
    _check_array("flow", flow, (3,), (2,))
    valid = np.isfinite(flow).all(axis=2) if valid is None else np.asarray(valid, bool)
    if valid.shape != flow.shape[:2]:
        raise ValueError(f"valid must be [H, W] of flow: {valid.shape=}, {flow.shape=}")
    scaled = np.rint(np.asarray(flow, np.float64) * KITTI_FLOW_SCALE) + KITTI_FLOW_OFFSET
    scaled = np.where(valid[..., None], scaled, 0.0)
    if np.isnan(scaled).any() or scaled.min() < 0 or scaled.max() > 0xFFFF:
        raise ValueError("valid flow must be finite and within [-512, 511.98] to fit KITTI PNG")
    raw = np.concatenate([scaled, valid[..., None]], axis=2).astype(np.uint16)
    write_png16(path, raw)


# ----------------------------------------------------------------------------- .npy


def read_npy(path: PathLike) -> np.ndarray:
    """Read a ``.npy`` array (never unpickles objects; a ``.npz`` archive is refused).

    The shape and dtype of the header are checked before the array is allocated: against the
    bytes the file holds, then against the memory available
    (:func:`crossview.memory.check_memory`)."""
    with _require_file(path).open("rb") as handle:
        # np.load would hand back an open NpzFile for a zip archive, whatever the suffix
        if handle.read(len(NPY_MAGIC)) != NPY_MAGIC:
            raise UserError(f"{path}: cannot read .npy (no .npy header; .npz archives and "
                            "other files are not arrays)")
        handle.seek(0)
        try:
            shape, dtype = _npy_header(handle)
            needed = memory.array_bytes(shape, dtype.itemsize)
            held = os.fstat(handle.fileno()).st_size - handle.tell()
            if needed > held:
                raise UserError(f"{path}: truncated or corrupt .npy (header says {shape} "
                                f"{dtype} = {needed} bytes, the file holds {held})")
            memory.check_memory(needed, f"{path} ({shape} {dtype})",
                                "run where more memory is free")
            handle.seek(0)
            return np.load(handle, allow_pickle=False)
        except (OSError, ValueError, EOFError) as error:
            raise UserError(f"{path}: cannot read .npy ({error})") from None


def _npy_header(handle: BinaryIO) -> tuple[tuple[int, ...], np.dtype]:
    """``(shape, dtype)`` of the ``.npy`` header at the start of ``handle`` (left after it)."""
    version = npy_format.read_magic(handle)
    read_header = {(1, 0): npy_format.read_array_header_1_0,
                   (2, 0): npy_format.read_array_header_2_0}.get(version)
    if read_header is None:  # 3.0 only adds UTF-8 field names, which no crossview array has
        raise ValueError(f"unsupported .npy format version {version[0]}.{version[1]}")
    shape, _, dtype = read_header(handle)
    return shape, dtype


def write_npy(path: PathLike, array: np.ndarray) -> None:
    """Write ``array`` to a ``.npy`` file."""
    with atomic_output(path) as tmp, tmp.open("wb") as handle:
        np.save(handle, np.asarray(array), allow_pickle=False)


# ----------------------------------------------------------------------------- dispatch


def read(path: PathLike) -> np.ndarray:
    """Read any supported file by its type and return its natural content.

    ``.pfm`` -> :func:`read_pfm`, ``.flo`` -> :func:`read_flo`, ``.npy`` -> :func:`read_npy`,
    a 16-bit PNG -> :func:`read_png16` (raw uint16), any other image -> :func:`read_image`.
    """
    suffix = Path(path).suffix.lower()
    if suffix == ".pfm":
        return read_pfm(path)
    if suffix == ".flo":
        return read_flo(path)
    if suffix == ".npy":
        return read_npy(path)
    if suffix == ".png":
        with _require_file(path).open("rb") as handle:
            header = handle.read(26)
        if header.startswith(png.SIGNATURE) and len(header) == 26 and header[24] == 16:
            return read_png16(path)
        return read_image(path)
    if suffix in IMAGE_SUFFIXES:
        return read_image(path)
    known = ", ".join((".pfm", ".flo", ".npy", *IMAGE_SUFFIXES))
    raise UserError(f"{path}: unknown file type {suffix!r} (known: {known})")
