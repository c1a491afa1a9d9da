from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch
from PIL import Image

from crossview.data.datasets.image_sequences import ImageSequencePairs, find_sequences
from crossview.errors import UserError


def _write(folder: Path, count: int, size: tuple[int, int] = (40, 60), grey: bool = False,
           start: int = 0) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    for i in range(count):
        rng = np.random.default_rng(start + i)
        shape = size if grey else (*size, 3)
        Image.fromarray(rng.integers(0, 255, shape, dtype=np.uint8)).save(folder / f"{i:03d}.png")


def test_sequences_are_found_sorted_and_single_frames_skipped(tmp_path: Path) -> None:
    _write(tmp_path / "b", 3)
    _write(tmp_path / "a", 2, grey=True)
    _write(tmp_path / "c", 1)
    (tmp_path / "a" / "notes.txt").write_text("not a frame")
    sequences = find_sequences(tmp_path)
    assert [[p.name for p in s] for s in sequences] == [["000.png", "001.png"],
                                                        ["000.png", "001.png", "002.png"]]


def test_samples_are_deterministic_crops_of_frame_pairs(tmp_path: Path) -> None:
    _write(tmp_path / "seq", 4, size=(40, 60))
    data = ImageSequencePairs(tmp_path, 20, (32, 48), max_gap=2, seed=3)
    sample = data[5]
    assert set(sample) == {"img0", "img1"}
    assert sample["img0"].shape == (3, 32, 48) and sample["img0"].dtype == torch.float32
    assert torch.equal(sample["img0"], data[5]["img0"])
    frames = [np.asarray(Image.open(tmp_path / "seq" / f"{i:03d}.png")) for i in range(4)]
    for i in range(20):  # every crop is cut from one frame, the pair from two distinct frames
        s = data[i]
        found = []
        for img in (s["img0"], s["img1"]):
            crop = img.permute(1, 2, 0).numpy().astype(np.uint8)
            hits = [k for k, f in enumerate(frames) for flip in (False, True)
                    for y in range(9) for x in range(13)
                    if np.array_equal((f[:, ::-1] if flip else f)[y:y + 32, x:x + 48], crop)]
            assert hits
            found.append(hits[0])
        assert 1 <= abs(found[0] - found[1]) <= 2


def test_small_frames_are_enlarged_to_cover_the_crop(tmp_path: Path) -> None:
    _write(tmp_path / "small", 2, size=(20, 30), grey=True)
    sample = ImageSequencePairs(tmp_path, 2, (32, 64))[0]
    assert sample["img1"].shape == (3, 32, 64)
    assert torch.equal(sample["img1"][0], sample["img1"][2])  # grey stays grey


@pytest.mark.parametrize("case", ["missing", "no_pairs", "unreadable", "sizes"])
def test_bad_folders_are_one_clear_error(tmp_path: Path, case: str) -> None:
    root = tmp_path / "root"
    if case == "no_pairs":
        _write(root / "a", 1)
    elif case == "unreadable":
        _write(root / "a", 1)
        (root / "a" / "001.png").write_bytes(b"not a png")
    elif case == "sizes":
        _write(root / "a", 1, size=(40, 60))
        _write(root / "tmp", 1, size=(42, 60), start=1)
        (root / "tmp" / "000.png").rename(root / "a" / "001.png")
    expected = {"missing": "not a folder", "no_pairs": "two or more frames",
                "unreadable": "001.png", "sizes": "differ in size"}[case]
    with pytest.raises(UserError, match=expected):
        ImageSequencePairs(root, 4, (16, 16), max_gap=1)[0]
