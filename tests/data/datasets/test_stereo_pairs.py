from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch
from PIL import Image

from crossview.data.datasets.stereo_pairs import UnlabelledStereoPairs, find_stereo_pairs
from crossview.errors import UserError

DISPARITY = 5


def _pair(folder: Path, size: tuple[int, int] = (40, 60), seed: int = 0,
          suffix: str = ".png") -> None:
    """A rectified pair with the same disparity everywhere: left (x, y) = right (x - 5, y)."""
    folder.mkdir(parents=True, exist_ok=True)
    h, w = size
    texture = np.random.default_rng(seed).integers(0, 255, (h, w + DISPARITY, 3), dtype=np.uint8)
    Image.fromarray(texture[:, :w]).save(folder / f"left{suffix}")
    Image.fromarray(texture[:, DISPARITY:]).save(folder / f"right{suffix}")


def test_pairs_are_found_sorted_and_folders_without_both_views_skipped(tmp_path: Path) -> None:
    _pair(tmp_path / "b")
    _pair(tmp_path / "a", suffix=".jpg")
    (tmp_path / "c").mkdir()
    Image.fromarray(np.zeros((8, 8, 3), np.uint8)).save(tmp_path / "c" / "left.png")
    (tmp_path / "b" / "gt.npy").write_bytes(b"not read")
    pairs = find_stereo_pairs(tmp_path)
    assert [(p.parent.name, p.name, q.name) for p, q in pairs] == [
        ("a", "left.jpg", "right.jpg"), ("b", "left.png", "right.png")]


def test_samples_are_deterministic_crops_that_keep_the_pair_rectified(tmp_path: Path) -> None:
    _pair(tmp_path / "scene", size=(40, 60))
    data = UnlabelledStereoPairs(tmp_path, 40, (32, 48), seed=3)
    mirrored = 0
    for index in range(40):
        sample = data[index]
        assert set(sample) == {"img0", "img1"}
        assert sample["img0"].shape == (3, 32, 48) and sample["img0"].dtype == torch.float32
        assert torch.equal(sample["img0"], data[index]["img0"])
        left, right = sample["img0"], sample["img1"]
        # one crop window for both views: left (x, y) still matches right (x - 5, y)
        assert torch.equal(left[:, :, DISPARITY:], right[:, :, :-DISPARITY])
        source = np.asarray(Image.open(tmp_path / "scene" / "left.png"))
        crops = [source[t:t + 32, s:s + 48] for t in range(9) for s in range(13)]
        as_read = left.permute(1, 2, 0).numpy().astype(np.uint8)
        mirrored += not any(np.array_equal(as_read, crop) for crop in crops)
    assert 8 < mirrored < 32  # the mirrored pair (flip(right), flip(left)) half of the time


def test_small_pairs_are_enlarged_to_cover_the_crop(tmp_path: Path) -> None:
    _pair(tmp_path / "small", size=(20, 30))
    sample = UnlabelledStereoPairs(tmp_path, 4, (32, 48))[0]
    assert sample["img0"].shape == sample["img1"].shape == (3, 32, 48)


def test_bad_folders_and_pairs_are_named(tmp_path: Path) -> None:
    with pytest.raises(UserError, match="is not a folder"):
        find_stereo_pairs(tmp_path / "nowhere")
    with pytest.raises(UserError, match=r"no folder under .* holds a left and a right image"):
        find_stereo_pairs(tmp_path)
    _pair(tmp_path / "odd")
    Image.fromarray(np.zeros((41, 60, 3), np.uint8)).save(tmp_path / "odd" / "right.png")
    with pytest.raises(UserError, match="differ in size"):
        UnlabelledStereoPairs(tmp_path, 2, (32, 48))[0]
    with pytest.raises(ValueError, match="positive"):
        UnlabelledStereoPairs(tmp_path, 0, (32, 48))
    with pytest.raises(IndexError):
        UnlabelledStereoPairs(tmp_path, 2, (32, 48))[2]
