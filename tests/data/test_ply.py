"""``crossview.data.ply``: binary PLY read back by an independent parser (``plyfile``) and
byte by byte against the format's description."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import plyfile
import pytest

from crossview.data.ply import ply_bytes, write_ply


def _cloud(n: int = 50) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(3)
    return (rng.normal(size=(n, 3)).astype(np.float32),
            rng.integers(0, 256, (n, 3), dtype=np.uint8))


def test_plyfile_reads_it_back(tmp_path: Path) -> None:
    points, colours = _cloud()
    write_ply(tmp_path / "c.ply", points, colours)
    data = plyfile.PlyData.read(str(tmp_path / "c.ply"))
    assert data.text is False and data.byte_order == "<"
    vertex = data["vertex"]
    assert vertex.count == 50
    np.testing.assert_array_equal(np.stack([vertex[a] for a in "xyz"], 1), points)
    np.testing.assert_array_equal(np.stack([vertex[c] for c in ("red", "green", "blue")], 1),
                                  colours)


def test_header_and_body_by_hand() -> None:
    points = np.array([[1.0, -2.0, 3.5]], np.float32)
    colours = np.array([[255, 0, 7]], np.uint8)
    data = ply_bytes(points, colours)
    header, body = data.split(b"end_header\n")
    lines = header.decode("ascii").splitlines()
    assert lines[:2] == ["ply", "format binary_little_endian 1.0"]
    assert "element vertex 1" in lines
    assert body == np.array([1.0, -2.0, 3.5], "<f4").tobytes() + bytes([255, 0, 7])


def test_an_empty_cloud_is_a_valid_file(tmp_path: Path) -> None:
    write_ply(tmp_path / "e.ply", np.zeros((0, 3)), np.zeros((0, 3), np.uint8))
    assert plyfile.PlyData.read(str(tmp_path / "e.ply"))["vertex"].count == 0


@pytest.mark.parametrize("points,colours", [
    (np.zeros((4, 2)), np.zeros((4, 3), np.uint8)),
    (np.zeros((4, 3)), np.zeros((4, 3), np.float32)),
    (np.zeros((4, 3)), np.zeros((3, 3), np.uint8)),
])
def test_bad_shapes(points: np.ndarray, colours: np.ndarray) -> None:
    with pytest.raises(ValueError):
        ply_bytes(points, colours)
