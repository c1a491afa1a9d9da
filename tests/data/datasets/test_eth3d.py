from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from crossview.data import io
from crossview.data.datasets import ETH3D
from crossview.errors import UserError

H, W = 6, 8


@pytest.mark.parametrize("separate_gt", [True, False])
def test_two_view_layout(tmp_path: Path, separate_gt: bool, write_image, write_mask, rng,
                         mkparent) -> None:
    scene = tmp_path / "two_view_training" / "delivery_area_1l"
    image0, image1 = write_image(scene / "im0.png"), write_image(scene / "im1.png")
    gt = tmp_path / "two_view_training_gt" / scene.name if separate_gt else scene
    disparity = rng.uniform(0, 30, (H, W)).astype(np.float32)
    disparity[2, 3] = np.inf
    io.write_pfm(mkparent(gt / "disp0GT.pfm"), disparity)
    nocc = np.full((H, W), 255, np.uint8)
    nocc[4, :] = 128
    write_mask(gt / "mask0nocc.png", nocc)
    write_image(tmp_path / "two_view_test" / "lakeside_1l" / "im0.png")  # no ground truth

    dataset = ETH3D(tmp_path)
    assert len(dataset) == 1
    sample = dataset[0]
    assert sample["name"] == "delivery_area_1l"
    np.testing.assert_array_equal(sample["image0"], image0)
    np.testing.assert_array_equal(sample["image1"], image1)
    finite = np.isfinite(disparity)
    np.testing.assert_array_equal(sample["valid"], finite)
    np.testing.assert_array_equal(sample["valid_noc"], finite & (nocc == 255))
    np.testing.assert_array_equal(sample["disparity"], np.where(finite, disparity, 0))


def test_missing_ground_truth_means_no_samples(tmp_path: Path, write_image) -> None:
    write_image(tmp_path / "two_view_training" / "scene" / "im0.png")
    with pytest.raises(UserError, match="two_view_training_gt"):
        ETH3D(tmp_path)
