from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from crossview.data import io
from crossview.data.datasets import FlyingChairs
from crossview.errors import UserError

H, W = 6, 8


def _release(root: Path, write_image, rng, mkparent, codes=(1, 2, 1)) -> list:
    truth = []
    for i in range(1, len(codes) + 1):
        flow = rng.normal(0, 4, (H, W, 2)).astype(np.float32)
        io.write_flo(mkparent(root / "data" / f"{i:05d}_flow.flo"), flow)
        truth.append((write_image(root / "data" / f"{i:05d}_img1.ppm"),
                      write_image(root / "data" / f"{i:05d}_img2.ppm"), flow))
    (root / "FlyingChairs_train_val.txt").write_text("".join(f"{c}\n" for c in codes))
    return truth


def test_splits_and_samples(tmp_path: Path, write_image, rng, mkparent) -> None:
    truth = _release(tmp_path, write_image, rng, mkparent)
    assert [s["name"] for s in FlyingChairs(tmp_path, split="train")] == ["00001", "00003"]
    validation = FlyingChairs(tmp_path)
    assert len(validation) == 1
    sample = validation[0]
    assert sample["name"] == "00002"
    for key, value in zip(("image0", "image1", "flow"), truth[1], strict=True):
        np.testing.assert_array_equal(sample[key], value)
    assert sample["valid"].all()
    assert len(FlyingChairs(tmp_path, split="all")) == 3


def test_split_file_problems(tmp_path: Path, write_image, rng, mkparent) -> None:
    _release(tmp_path, write_image, rng, mkparent, codes=(1, 2))
    (tmp_path / "FlyingChairs_train_val.txt").write_text("1\n")
    with pytest.raises(UserError, match="expected 2 lines"):
        FlyingChairs(tmp_path)
    (tmp_path / "FlyingChairs_train_val.txt").unlink()
    with pytest.raises(UserError, match="split=all"):
        FlyingChairs(tmp_path)
    with pytest.raises(UserError, match="found no samples; expected a FlyingChairs"):
        FlyingChairs(tmp_path / "data", split="all")
