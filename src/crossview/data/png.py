"""A small lossless PNG codec for 8- and 16-bit grey/colour images, in numpy.

Pillow reads 16-bit colour PNGs only after truncating them to 8 bits, but KITTI optical flow is
stored as a 16-bit RGB PNG, so crossview decodes such files itself. The decoder supports what
the PNG specification calls bit depths 8 and 16 with colour types 0 (grey), 2 (RGB), 4 (grey +
alpha) and 6 (RGBA), without interlacing, and all five row filters. It checks chunk CRCs and
refuses headers whose size cannot be backed by the compressed data before it decompresses
anything, so a malformed file cannot make it allocate a huge array.
"""

from __future__ import annotations

import struct
import zlib

import numpy as np

from crossview.errors import UserError

SIGNATURE = b"\x89PNG\r\n\x1a\n"
CHANNELS = {0: 1, 2: 3, 4: 2, 6: 4}  # colour type -> samples per pixel
# deflate cannot expand data by more than ~1032:1, so a header asking for more raw bytes than
# this multiple of the compressed size is a lie (plus slack for tiny images).
_MAX_DEFLATE_RATIO = 1100


def _chunks(data: bytes, name: str) -> list[tuple[bytes, bytes]]:
    if not data.startswith(SIGNATURE):
        raise UserError(f"{name}: not a PNG file (wrong signature)")
    chunks = []
    pos = len(SIGNATURE)
    while True:
        if pos + 8 > len(data):
            raise UserError(f"{name}: truncated PNG (no IEND chunk)")
        length, kind = struct.unpack(">I4s", data[pos : pos + 8])
        end = pos + 8 + length + 4
        if end > len(data):
            raise UserError(f"{name}: truncated PNG (chunk {kind!r} claims {length} bytes)")
        body = data[pos + 8 : pos + 8 + length]
        (crc,) = struct.unpack(">I", data[end - 4 : end])
        if zlib.crc32(kind + body) & 0xFFFFFFFF != crc:
            raise UserError(f"{name}: corrupt PNG (CRC mismatch in chunk {kind!r})")
        chunks.append((kind, body))
        if kind == b"IEND":
            return chunks
        pos = end


def _paeth(a: np.ndarray, b: np.ndarray, c: np.ndarray) -> np.ndarray:
    p = a + b - c
    pa, pb, pc = np.abs(p - a), np.abs(p - b), np.abs(p - c)
    return np.where((pa <= pb) & (pa <= pc), a, np.where(pb <= pc, b, c))


def _unfilter(rows: np.ndarray, width: int, bpp: int) -> np.ndarray:
    """Undo the PNG row filters of ``rows`` ``[H, 1 + W*bpp]`` uint8; return ``[H, W, bpp]``.

    Pixel (r, p) depends on (r, p-1), (r-1, p) and (r-1, p-1), so all pixels of one
    anti-diagonal k = r + p are independent. The image is stored skewed, ``S[r + 1, k + 2] =
    X[r, k - r]`` (zeros elsewhere, which is PNG's "outside the image"), so that diagonal k is
    column k + 2 and its neighbours left, up and up-left are the column slices ``S[r+1, k+1]``,
    ``S[r, k+1]`` and ``S[r, k]``: each step reconstructs a whole diagonal with slices only.
    """
    height = rows.shape[0]
    types = rows[:, 0].astype(np.int16)
    if types.size and types.max() > 4:
        raise ValueError(f"unknown PNG filter type {int(types.max())}")
    r_index = np.arange(height)[:, None]
    skewed_cols = r_index + np.arange(width)[None, :]  # k = r + p
    filtered = np.zeros((height, height + width - 1, bpp), np.int16)
    filtered[r_index, skewed_cols] = rows[:, 1:].reshape(height, width, bpp)
    out = np.zeros((height + 1, height + width + 1, bpp), np.int16)
    kinds = types[:, None]
    for k in range(height + width - 1):
        r0, r1 = max(0, k - width + 1), min(height - 1, k) + 1
        a = out[r0 + 1 : r1 + 1, k + 1]
        b = out[r0:r1, k + 1]
        c = out[r0:r1, k]
        kind = kinds[r0:r1]
        predicted = np.where(kind == 1, a, np.where(kind == 2, b, 0))
        average = kind == 3
        if average.any():
            predicted = np.where(average, (a + b) >> 1, predicted)
        paeth = kind == 4
        if paeth.any():
            predicted = np.where(paeth, _paeth(a, b, c), predicted)
        out[r0 + 1 : r1 + 1, k + 2] = (filtered[r0:r1, k] + predicted) & 0xFF
    return out[1:][r_index, skewed_cols + 2].astype(np.uint8)


def decode(data: bytes, name: str = "PNG") -> np.ndarray:
    """Decode PNG bytes into ``[H, W]`` (grey) or ``[H, W, C]`` uint8/uint16, values unchanged.

    Raises :class:`UserError` (mentioning ``name``) for anything malformed or unsupported.
    """
    chunks = _chunks(data, name)
    if not chunks or chunks[0][0] != b"IHDR" or len(chunks[0][1]) != 13:
        raise UserError(f"{name}: corrupt PNG (missing IHDR)")
    width, height, depth, colour, _, _, interlace = struct.unpack(">IIBBBBB", chunks[0][1])
    if depth not in (8, 16) or colour not in CHANNELS:
        raise UserError(f"{name}: unsupported PNG (bit depth {depth}, colour type {colour})")
    if interlace:
        raise UserError(f"{name}: interlaced PNGs are not supported here")
    compressed = b"".join(body for kind, body in chunks if kind == b"IDAT")
    channels = CHANNELS[colour]
    bpp = channels * depth // 8
    raw_size = height * (1 + width * bpp)
    if width == 0 or height == 0 or raw_size > _MAX_DEFLATE_RATIO * len(compressed) + 4096:
        raise UserError(
            f"{name}: corrupt PNG (header says {width}x{height}, which {len(compressed)} "
            "compressed bytes cannot hold)"
        )
    inflater = zlib.decompressobj()
    try:
        raw = inflater.decompress(compressed, raw_size)
    except zlib.error as error:
        raise UserError(f"{name}: corrupt PNG data ({error})") from None
    if len(raw) != raw_size:
        raise UserError(f"{name}: truncated PNG data ({len(raw)} of {raw_size} bytes)")
    try:
        pixels = _unfilter(np.frombuffer(raw, np.uint8).reshape(height, -1), width, bpp)
    except ValueError as error:
        raise UserError(f"{name}: corrupt PNG ({error})") from None
    if depth == 16:
        pixels = pixels.reshape(height, width, channels, 2)
        pixels = (pixels[..., 0].astype(np.uint16) << 8) | pixels[..., 1]
    pixels = pixels.reshape(height, width, channels)
    return pixels[..., 0] if channels == 1 else pixels


def encode(array: np.ndarray) -> bytes:
    """Encode ``[H, W]`` or ``[H, W, C]`` (C in 1..4) uint8 or uint16 as PNG bytes, losslessly."""
    if array.dtype not in (np.uint8, np.uint16):
        raise TypeError(f"PNG needs uint8 or uint16 values, got {array.dtype=}")
    if array.ndim == 2:
        array = array[..., None]
    if array.ndim != 3 or array.shape[2] not in (1, 2, 3, 4) or 0 in array.shape[:2]:
        raise ValueError(f"PNG needs a non-empty [H, W] or [H, W, 1..4] array, got {array.shape=}")
    height, width, channels = array.shape
    colour = {1: 0, 3: 2, 2: 4, 4: 6}[channels]
    depth = 16 if array.dtype == np.uint16 else 8
    # order="C": only a row-major copy can be viewed as bytes (a flow [H, W, 2] that is a
    # transposed view of a [2, H, W] tensor is not one)
    rows = array.astype(">u2" if depth == 16 else np.uint8, order="C").view(np.uint8).reshape(
        height, -1)
    # filter "Up" on every row: cheap to vectorise and good for smooth maps
    up = np.diff(rows, axis=0, prepend=np.zeros((1, rows.shape[1]), np.uint8))
    raw = np.concatenate([np.full((height, 1), 2, np.uint8), up], axis=1).tobytes()

    def chunk(kind: bytes, body: bytes) -> bytes:
        crc = zlib.crc32(kind + body) & 0xFFFFFFFF
        return struct.pack(">I", len(body)) + kind + body + struct.pack(">I", crc)

    header = struct.pack(">IIBBBBB", width, height, depth, colour, 0, 0, 0)
    return SIGNATURE + chunk(b"IHDR", header) + chunk(b"IDAT", zlib.compress(raw, 6)) + chunk(
        b"IEND", b""
    )
