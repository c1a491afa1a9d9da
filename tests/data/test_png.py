from __future__ import annotations

import io
import struct
import zlib

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp
from PIL import Image

from crossview.data import png
from crossview.errors import UserError


def _paeth_naive(a: int, b: int, c: int) -> int:
    p = a + b - c
    pa, pb, pc = abs(p - a), abs(p - b), abs(p - c)
    if pa <= pb and pa <= pc:
        return a
    return b if pb <= pc else c


def _filter_naive(rows: list[bytes], types: list[int], bpp: int) -> bytes:
    """The PNG specification's row filters, written byte by byte."""
    out = bytearray()
    prior = bytes(len(rows[0]))
    for row, kind in zip(rows, types, strict=True):
        out.append(kind)
        for i, x in enumerate(row):
            a = row[i - bpp] if i >= bpp else 0
            b = prior[i]
            c = prior[i - bpp] if i >= bpp else 0
            pred = [0, a, b, (a + b) // 2, _paeth_naive(a, b, c)][kind]
            out.append((x - pred) % 256)
        prior = row
    return bytes(out)


def _png_bytes(width: int, height: int, depth: int, colour: int, raw: bytes) -> bytes:
    def chunk(kind: bytes, body: bytes) -> bytes:
        return struct.pack(">I", len(body)) + kind + body + struct.pack(
            ">I", zlib.crc32(kind + body) & 0xFFFFFFFF
        )

    header = struct.pack(">IIBBBBB", width, height, depth, colour, 0, 0, 0)
    return png.SIGNATURE + chunk(b"IHDR", header) + chunk(b"IDAT", zlib.compress(raw)) + chunk(
        b"IEND", b""
    )


@settings(max_examples=40, deadline=None)
@given(
    data=st.data(),
    colour=st.sampled_from([0, 2, 4, 6]),
    depth=st.sampled_from([8, 16]),
    height=st.integers(1, 6),
    width=st.integers(1, 7),
)
def test_decode_matches_naive_filters_of_every_type(data, colour, depth, height, width) -> None:
    channels = png.CHANNELS[colour]
    dtype = np.uint16 if depth == 16 else np.uint8
    pixels = data.draw(hnp.arrays(dtype, (height, width, channels)))
    types = data.draw(st.lists(st.integers(0, 4), min_size=height, max_size=height))
    big = pixels.astype(">u2") if depth == 16 else pixels
    rows = [big[r].tobytes() for r in range(height)]
    raw = _filter_naive(rows, types, channels * depth // 8)
    decoded = png.decode(_png_bytes(width, height, depth, colour, raw))
    expected = pixels[..., 0] if channels == 1 else pixels
    assert decoded.dtype == dtype
    np.testing.assert_array_equal(decoded, expected)


@settings(max_examples=30, deadline=None)
@given(array=hnp.arrays(
    st.sampled_from([np.uint8, np.uint16]),
    st.tuples(st.integers(1, 9), st.integers(1, 9), st.sampled_from([1, 2, 3, 4])),
))
def test_encode_decode_round_trip(array: np.ndarray) -> None:
    expected = array[..., 0] if array.shape[2] == 1 else array
    np.testing.assert_array_equal(png.decode(png.encode(array)), expected)


def test_encode_takes_arrays_of_any_memory_layout() -> None:
    """A channel-last view of a channel-first array (a permuted tensor) is not row-major."""
    planes = np.arange(2 * 5 * 7, dtype=np.uint16).reshape(2, 5, 7) * 900
    view = planes.transpose(1, 2, 0)
    np.testing.assert_array_equal(png.decode(png.encode(view)), view)


def test_decode_agrees_with_pillow_on_adaptively_filtered_files() -> None:
    rng = np.random.default_rng(0)
    image = (np.cumsum(rng.integers(0, 9, (23, 31, 3)), axis=1) % 256).astype(np.uint8)
    grey16 = rng.integers(0, 2**16, (17, 13)).astype(np.uint16)
    for array in (image, grey16):
        buffer = io.BytesIO()
        Image.fromarray(array).save(buffer, format="PNG")
        np.testing.assert_array_equal(png.decode(buffer.getvalue()), array)


def test_encoded_16bit_grey_is_read_identically_by_pillow() -> None:
    array = np.arange(0, 65535, 2731, dtype=np.uint16).reshape(4, 6)
    with Image.open(io.BytesIO(png.encode(array))) as image:
        np.testing.assert_array_equal(np.asarray(image).astype(np.uint16), array)


@pytest.mark.parametrize(
    ("mutate", "message"),
    [
        (lambda b: b"GIF89a" + b[6:], "signature"),
        (lambda b: b[: len(b) - 20], "truncated"),
        (lambda b: b[:20] + bytes([b[20] ^ 1]) + b[21:], "CRC"),
    ],
)
def test_malformed_files_raise_user_error(mutate, message: str) -> None:
    data = png.encode(np.zeros((4, 4, 3), np.uint16))
    with pytest.raises(UserError, match=message):
        png.decode(mutate(data))


def test_absurd_header_size_is_refused_before_decompressing() -> None:
    data = _png_bytes(100_000, 100_000, 16, 2, zlib.compress(b"\0" * 10))
    with pytest.raises(UserError, match="cannot hold"):
        png.decode(data)


def test_unknown_filter_type_and_short_data_raise_user_error() -> None:
    with pytest.raises(UserError, match="filter"):
        png.decode(_png_bytes(2, 1, 8, 0, b"\x07\x00\x00"))
    with pytest.raises(UserError, match="truncated"):
        png.decode(_png_bytes(2, 2, 8, 0, b"\x00\x00\x00"))


def test_encode_rejects_wrong_dtype_and_shape() -> None:
    with pytest.raises(TypeError, match="dtype"):
        png.encode(np.zeros((2, 2), np.float32))
    with pytest.raises(ValueError, match="shape"):
        png.encode(np.zeros((2, 2, 5), np.uint8))
