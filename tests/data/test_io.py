from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp
from numpy.lib import format as npy_format
from PIL import Image

from crossview.data import io
from crossview.errors import UserError

SETTINGS = settings(max_examples=25, deadline=None,
                    suppress_health_check=[HealthCheck.function_scoped_fixture])
SHAPES = st.tuples(st.integers(1, 8), st.integers(1, 8))
FINITE = st.floats(-1e6, 1e6, width=32)


# ----------------------------------------------------------------------------- round trips


@SETTINGS
@given(data=st.data(), channels=st.sampled_from([1, 3]), little=st.booleans(), shape=SHAPES)
def test_pfm_round_trip(tmp_path: Path, data, channels: int, little: bool, shape) -> None:
    full = shape if channels == 1 else (*shape, 3)
    values = data.draw(hnp.arrays(np.float32, full, elements=st.floats(width=32)))
    io.write_pfm(tmp_path / "a.pfm", values, little_endian=little)
    np.testing.assert_array_equal(io.read_pfm(tmp_path / "a.pfm"), values)


def test_pfm_layout_is_bottom_to_top_with_sign_as_endianness(tmp_path: Path) -> None:
    values = np.array([[1.0, 2.0], [3.0, 4.0]], np.float32)
    io.write_pfm(tmp_path / "le.pfm", values)
    io.write_pfm(tmp_path / "be.pfm", values, little_endian=False)
    le = (tmp_path / "le.pfm").read_bytes()
    be = (tmp_path / "be.pfm").read_bytes()
    assert le.startswith(b"Pf\n2 2\n-1.0\n") and be.startswith(b"Pf\n2 2\n1.0\n")
    assert np.frombuffer(le[-16:], "<f4").tolist() == [3.0, 4.0, 1.0, 2.0]
    assert np.frombuffer(be[-16:], ">f4").tolist() == [3.0, 4.0, 1.0, 2.0]


def test_pfm_reads_a_hand_written_big_endian_colour_file(tmp_path: Path) -> None:
    body = np.arange(6, dtype=">f4").tobytes()  # one row of 2 RGB pixels
    (tmp_path / "c.pfm").write_bytes(b"PF\n2 1\n2.5\n" + body)
    np.testing.assert_array_equal(io.read_pfm(tmp_path / "c.pfm"), np.arange(6).reshape(1, 2, 3))


@SETTINGS
@given(flow=hnp.arrays(np.float32, st.tuples(st.integers(1, 8), st.integers(1, 8), st.just(2)),
                       elements=FINITE))
def test_flo_round_trip(tmp_path: Path, flow: np.ndarray) -> None:
    io.write_flo(tmp_path / "a.flo", flow)
    np.testing.assert_array_equal(io.read_flo(tmp_path / "a.flo"), flow)


def test_flo_layout(tmp_path: Path) -> None:
    io.write_flo(tmp_path / "a.flo", np.array([[[1.0, 2.0], [3.0, 4.0]]], np.float32))
    data = (tmp_path / "a.flo").read_bytes()
    assert data[:4] == b"PIEH"
    assert np.frombuffer(data[4:12], "<i4").tolist() == [2, 1]
    assert np.frombuffer(data[12:], "<f4").tolist() == [1.0, 2.0, 3.0, 4.0]


@SETTINGS
@given(data=st.data(), shape=SHAPES)
def test_kitti_disparity_round_trip(tmp_path: Path, data, shape) -> None:
    raw = data.draw(hnp.arrays(np.uint16, shape))
    disparity = raw / 256.0
    io.write_kitti_disparity(tmp_path / "d.png", disparity)
    read, valid = io.read_kitti_disparity(tmp_path / "d.png")
    np.testing.assert_array_equal(valid, raw > 0)
    np.testing.assert_array_equal(read, disparity.astype(np.float32))
    assert read.dtype == np.float32


def test_kitti_disparity_encoding(tmp_path: Path) -> None:
    disparity = np.array([[0.0, 1.5, 0.001, 7.0]])
    valid = np.array([[False, True, True, False]])
    io.write_kitti_disparity(tmp_path / "d.png", disparity, valid)
    np.testing.assert_array_equal(io.read_png16(tmp_path / "d.png"), [[0, 384, 1, 0]])
    # the largest storable value; just above it rounds to 65536, which must not wrap to 0
    io.write_kitti_disparity(tmp_path / "d.png", np.array([[65535.49 / 256]]))
    np.testing.assert_array_equal(io.read_png16(tmp_path / "d.png"), [[65535]])
    with pytest.raises(ValueError, match="KITTI"):
        io.write_kitti_disparity(tmp_path / "d.png", np.array([[65535.5 / 256]]))


@SETTINGS
@given(data=st.data(), shape=SHAPES)
def test_kitti_flow_round_trip(tmp_path: Path, data, shape) -> None:
    raw = data.draw(hnp.arrays(np.uint16, (*shape, 2)))
    valid = data.draw(hnp.arrays(bool, shape))
    flow = (raw.astype(np.float64) - 2**15) / 64
    io.write_kitti_flow(tmp_path / "f.png", flow, valid)
    read, read_valid = io.read_kitti_flow(tmp_path / "f.png")
    np.testing.assert_array_equal(read_valid, valid)
    np.testing.assert_array_equal(read, np.where(valid[..., None], flow, 0).astype(np.float32))


def test_kitti_flow_encoding_channel_order(tmp_path: Path) -> None:
    io.write_kitti_flow(tmp_path / "f.png", np.array([[[1.0, -0.5]]]), np.array([[True]]))
    np.testing.assert_array_equal(io.read_png16(tmp_path / "f.png"),
                                  [[[2**15 + 64, 2**15 - 32, 1]]])


@SETTINGS
@given(array=hnp.arrays(np.uint16, st.tuples(st.integers(1, 6), st.integers(1, 6),
                                             st.sampled_from([1, 3, 4]))))
def test_png16_round_trip(tmp_path: Path, array: np.ndarray) -> None:
    array = array[..., 0] if array.shape[2] == 1 else array
    io.write_png16(tmp_path / "a.png", array)
    np.testing.assert_array_equal(io.read_png16(tmp_path / "a.png"), array)
    np.testing.assert_array_equal(io.read(tmp_path / "a.png"), array)


@SETTINGS
@given(array=hnp.arrays(st.sampled_from([np.float32, np.int64, np.uint8, bool]),
                        hnp.array_shapes(max_dims=3, max_side=5)))
def test_npy_round_trip(tmp_path: Path, array: np.ndarray) -> None:
    io.write_npy(tmp_path / "a.npy", array)
    np.testing.assert_array_equal(io.read_npy(tmp_path / "a.npy"), array)


@SETTINGS
@given(image=hnp.arrays(np.uint8, st.tuples(st.integers(1, 8), st.integers(1, 8), st.just(3))))
def test_image_round_trip(tmp_path: Path, image: np.ndarray) -> None:
    io.write_image(tmp_path / "a.png", image)
    np.testing.assert_array_equal(io.read_image(tmp_path / "a.png"), image)
    np.testing.assert_array_equal(io.read(tmp_path / "a.png"), image)


# ----------------------------------------------------------------------------- image modes


def test_read_image_converts_every_mode_to_rgb_uint8(tmp_path: Path) -> None:
    rgb = np.array([[[10, 20, 30], [200, 100, 0]]], np.uint8)
    grey = np.array([[7, 250]], np.uint8)
    Image.fromarray(grey, "L").save(tmp_path / "grey.png")
    Image.fromarray(np.dstack([rgb, [[1, 2]]]).astype(np.uint8), "RGBA").save(tmp_path / "a.png")
    palette = Image.new("P", (2, 1))
    palette.putpalette([10, 20, 30, 200, 100, 0] + [0] * 762)
    palette.putdata([0, 1])
    palette.save(tmp_path / "p.png")
    Image.fromarray(np.array([[0x1234, 0xFF00]], np.uint16)).save(tmp_path / "g16.png")
    io.write_png16(tmp_path / "rgb16.png", rgb.astype(np.uint16) * 257 + 3)

    np.testing.assert_array_equal(io.read_image(tmp_path / "grey.png"), np.dstack([grey] * 3))
    np.testing.assert_array_equal(io.read_image(tmp_path / "a.png"), rgb)
    np.testing.assert_array_equal(io.read_image(tmp_path / "p.png"), rgb)
    np.testing.assert_array_equal(io.read_image(tmp_path / "g16.png"),
                                  np.dstack([[[0x12, 0xFF]]] * 3))
    np.testing.assert_array_equal(io.read_image(tmp_path / "rgb16.png"), rgb)
    for name in ("grey.png", "a.png", "p.png", "g16.png", "rgb16.png"):
        assert io.read_image(tmp_path / name).dtype == np.uint8


def _written(path: Path, values: list[int], dtype: type) -> Path:
    Image.fromarray(np.array([values], dtype)).save(path)
    return path


def _grey(values: list[int]) -> np.ndarray:
    return np.dstack([np.array([values], np.uint8)] * 3)


def test_read_image_scales_by_the_files_bit_depth(tmp_path: Path) -> None:
    """8-bit files as stored; files that declare 16 bits (PNG, PGM, 16-bit TIFF) keep the high
    byte, so small values in them are dark; 32-bit integer files declare no white level and are
    read by the smallest of the 8- and 16-bit ranges that holds their values."""
    cases = [
        (_written(tmp_path / "g8.png", [0, 7, 128, 255], np.uint8), [0, 7, 128, 255]),
        (_written(tmp_path / "g16.png", [0x1234, 0xFF00, 255], np.uint16), [0x12, 0xFF, 0]),
        (_written(tmp_path / "g16.pgm", [0, 300, 65535], np.uint16), [0, 1, 255]),
        (_written(tmp_path / "g16.tif", [0, 300, 65535], np.uint16), [0, 1, 255]),
        (_written(tmp_path / "dark16.tif", [7, 255], np.uint16), [0, 0]),
        (_written(tmp_path / "i32_8bit.tif", [0, 7, 128, 255], np.int32), [0, 7, 128, 255]),
        (_written(tmp_path / "i32_16bit.tif", [0, 300, 65535], np.int32), [0, 1, 255]),
    ]
    assert Image.open(tmp_path / "g16.pgm").mode == "I"  # Pillow's 32-bit mode, 16-bit file
    assert Image.open(tmp_path / "i32_8bit.tif").mode == "I"
    for path, expected in cases:
        np.testing.assert_array_equal(io.read_image(path), _grey(expected), err_msg=path.name)
    for values in ([0, 70000], [-1, 5]):
        path = _written(tmp_path / "wide.tif", values, np.int32)
        with pytest.raises(UserError, match=r"wide\.tif: 32-bit integer image with values"):
            io.read_image(path)


# ----------------------------------------------------------------------------- errors


def test_missing_files_raise_user_error_for_every_reader(tmp_path: Path) -> None:
    readers = (io.read_image, io.read_pfm, io.read_flo, io.read_kitti_disparity,
               io.read_kitti_flow, io.read_png16, io.read_npy, io.read)
    for reader in readers:
        with pytest.raises(UserError, match="no such file"):
            reader(tmp_path / "missing.png")
    with pytest.raises(UserError, match="not a file"):
        io.read_pfm(tmp_path)


def test_corrupt_image_raises_user_error(tmp_path: Path) -> None:
    (tmp_path / "bad.png").write_bytes(b"not an image at all")
    with pytest.raises(UserError, match="cannot read image"):
        io.read_image(tmp_path / "bad.png")
    io.write_image(tmp_path / "ok.jpg", np.zeros((64, 64, 3), np.uint8))
    data = (tmp_path / "ok.jpg").read_bytes()
    (tmp_path / "cut.jpg").write_bytes(data[: len(data) // 3])
    with pytest.raises(UserError, match=r"cut\.jpg"):
        io.read_image(tmp_path / "cut.jpg")


@pytest.mark.parametrize(
    ("content", "message"),
    [
        (b"P6\n2 2\n255\n" + bytes(12), "not a PFM"),
        (b"Pf\n2 2\n-1.0\n" + bytes(15), "truncated"),
        (b"Pf\n100000 100000\n-1.0\n" + bytes(16), "truncated"),
        (b"Pf\n2 2\nnan\n" + bytes(16), "scale"),
        (b"Pf\n2 2\n0\n" + bytes(16), "scale"),
        (b"Pf\n0 2\n-1\n", "truncated"),
    ],
)
def test_malformed_pfm(tmp_path: Path, content: bytes, message: str) -> None:
    (tmp_path / "x.pfm").write_bytes(content)
    with pytest.raises(UserError, match=message):
        io.read_pfm(tmp_path / "x.pfm")


def _flo(width: int, height: int, body: bytes, magic: float = io.FLO_MAGIC) -> bytes:
    return np.array([magic], "<f4").tobytes() + np.array([width, height], "<i4").tobytes() + body


@pytest.mark.parametrize(
    ("content", "message"),
    [
        (_flo(2, 1, bytes(16), magic=1.0), "magic"),
        (b"PIE", "magic"),
        (_flo(2, 1, bytes(15)), "truncated"),
        (_flo(2**30, 2**30, bytes(16)), "truncated"),
        (_flo(-2, 1, bytes(16)), "truncated"),
        (_flo(1, 1, np.array([np.nan, 0], "<f4").tobytes()), "NaN"),
    ],
)
def test_malformed_flo(tmp_path: Path, content: bytes, message: str) -> None:
    (tmp_path / "x.flo").write_bytes(content)
    with pytest.raises(UserError, match=message):
        io.read_flo(tmp_path / "x.flo")


def test_kitti_readers_check_bit_depth_and_channels(tmp_path: Path) -> None:
    io.write_image(tmp_path / "rgb8.png", np.zeros((2, 2, 3), np.uint8))
    io.write_png16(tmp_path / "grey16.png", np.zeros((2, 2), np.uint16))
    io.write_png16(tmp_path / "rgb16.png", np.zeros((2, 2, 3), np.uint16))
    with pytest.raises(UserError, match="16-bit"):
        io.read_kitti_disparity(tmp_path / "rgb8.png")
    with pytest.raises(UserError, match="1-channel"):
        io.read_kitti_disparity(tmp_path / "rgb16.png")
    with pytest.raises(UserError, match="3-channel"):
        io.read_kitti_flow(tmp_path / "grey16.png")


def test_writers_refuse_bad_values_and_leave_no_file(tmp_path: Path) -> None:
    target = tmp_path / "out.png"
    with pytest.raises(ValueError, match="KITTI"):
        io.write_kitti_disparity(target, np.array([[300.0]]))
    with pytest.raises(ValueError, match="KITTI"):
        io.write_kitti_disparity(target, np.array([[np.nan]]), np.array([[True]]))
    with pytest.raises(ValueError, match="KITTI"):
        io.write_kitti_flow(target, np.array([[[600.0, 0.0]]]))
    with pytest.raises(ValueError, match="NaN"):
        io.write_flo(tmp_path / "out.flo", np.full((1, 1, 2), np.nan, np.float32))
    with pytest.raises(ValueError, match="shape"):
        io.write_pfm(tmp_path / "out.pfm", np.zeros((2, 2, 2), np.float32))
    assert list(tmp_path.iterdir()) == []


def test_atomic_output_keeps_old_file_on_failure(tmp_path: Path) -> None:
    target = tmp_path / "keep.txt"
    target.write_text("old")
    with pytest.raises(RuntimeError), io.atomic_output(target) as tmp:
        tmp.write_text("partial")
        raise RuntimeError("boom")
    assert target.read_text() == "old"
    assert list(tmp_path.iterdir()) == [target]
    with pytest.raises(UserError, match="does not exist"):
        io.write_flo(tmp_path / "no" / "dir.flo", np.zeros((1, 1, 2), np.float32))


def test_read_dispatches_on_type(tmp_path: Path) -> None:
    io.write_pfm(tmp_path / "a.pfm", np.ones((2, 3), np.float32))
    io.write_flo(tmp_path / "a.flo", np.ones((2, 3, 2), np.float32))
    io.write_npy(tmp_path / "a.npy", np.arange(4))
    assert io.read(tmp_path / "a.pfm").shape == (2, 3)
    assert io.read(tmp_path / "a.flo").shape == (2, 3, 2)
    np.testing.assert_array_equal(io.read(tmp_path / "a.npy"), np.arange(4))
    (tmp_path / "a.xyz").write_bytes(b"")
    with pytest.raises(UserError, match="unknown file type"):
        io.read(tmp_path / "a.xyz")


def test_npy_refuses_corrupt_and_pickled_files(tmp_path: Path) -> None:
    (tmp_path / "bad.npy").write_bytes(b"\x93NUMPY garbage")
    with pytest.raises(UserError, match=r"cannot read \.npy"):
        io.read_npy(tmp_path / "bad.npy")
    np.save(tmp_path / "obj.npy", np.array([{"a": 1}], dtype=object), allow_pickle=True)
    with pytest.raises(UserError, match=r"cannot read \.npy"):
        io.read_npy(tmp_path / "obj.npy")
    np.savez(tmp_path / "archive.npz", x=np.zeros(3))
    (tmp_path / "archive.npz").rename(tmp_path / "archive.npy")
    with pytest.raises(UserError, match=r"archive\.npy: cannot read \.npy"):
        io.read_npy(tmp_path / "archive.npy")  # np.load alone returns an NpzFile
    (tmp_path / "text.npy").write_text("1 2 3")
    with pytest.raises(UserError, match=r"text\.npy: cannot read \.npy"):
        io.read_npy(tmp_path / "text.npy")


def _npy_header_only(path: Path, shape: tuple[int, ...], data_bytes: int = 0) -> Path:
    """A .npy file whose header claims ``shape`` float32, followed by ``data_bytes`` (sparse:
    zeros that take no disk space)."""
    with path.open("wb") as handle:
        npy_format.write_array_header_1_0(
            handle, {"descr": "<f4", "fortran_order": False, "shape": shape})
        handle.truncate(handle.tell() + data_bytes)
    return path


def test_npy_header_sizes_are_checked_before_anything_is_allocated(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    claims = _npy_header_only(tmp_path / "claims.npy", (100000, 100000))
    with pytest.raises(UserError) as refused:
        io.read_npy(claims)
    assert str(refused.value) == (f"{claims}: truncated or corrupt .npy (header says (100000, "
                                  "100000) float32 = 40000000000 bytes, the file holds 0)")
    monkeypatch.setenv("CROSSVIEW_MAX_MEMORY_GB", "1")
    big = _npy_header_only(tmp_path / "big.npy", (32768, 16384), 2 * 2**30)  # 2 GiB of zeros
    with pytest.raises(UserError) as refused:
        io.read_npy(big)
    assert str(refused.value) == (f"{big} ((32768, 16384) float32) needs about 2 GiB of memory "
                                  "(estimate), more than the 1 GiB available "
                                  "($CROSSVIEW_MAX_MEMORY_GB); run where more memory is free")


def test_atomic_output_gives_the_mode_of_a_plain_open(tmp_path: Path) -> None:
    plain = tmp_path / "plain.npy"
    plain.write_bytes(b"")
    written = tmp_path / "written.npy"
    io.write_npy(written, np.zeros(3, np.float32))
    assert written.stat().st_mode & 0o777 == plain.stat().st_mode & 0o777
