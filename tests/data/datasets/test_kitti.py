from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from crossview.data import io
from crossview.data.datasets import KITTIFlow, KITTIStereo
from crossview.errors import UserError

H, W = 6, 8
FOLDERS = {2012: ("colored_0", "colored_1", "disp_occ", "disp_noc"),
           2015: ("image_2", "image_3", "disp_occ_0", "disp_noc_0")}


def _release(root: Path, year: int, write_image, rng, mkparent, count: int = 2) -> dict:
    left, right, disp_occ, disp_noc = FOLDERS[year]
    training = root / "training"
    truth = {}
    for i in range(count):
        name = f"{i:06d}"
        images = [write_image(training / left / f"{name}_10.png"),
                  write_image(training / right / f"{name}_10.png"),
                  write_image(training / left / f"{name}_11.png")]
        disparity = np.round(rng.uniform(1, 100, (H, W)) * 256) / 256
        occ = rng.random((H, W)) < 0.7
        noc = occ & (rng.random((H, W)) < 0.7)
        io.write_kitti_disparity(mkparent(training / disp_occ / f"{name}_10.png"), disparity, occ)
        io.write_kitti_disparity(mkparent(training / disp_noc / f"{name}_10.png"), disparity, noc)
        flow = np.round(rng.uniform(-50, 50, (H, W, 2)) * 64) / 64
        io.write_kitti_flow(mkparent(training / "flow_occ" / f"{name}_10.png"), flow, occ)
        io.write_kitti_flow(mkparent(training / "flow_noc" / f"{name}_10.png"), flow, noc)
        truth[name] = {"images": images, "disparity": disparity, "flow": flow, "occ": occ,
                       "noc": noc}
    write_image(root / "testing" / left / "000000_10.png")  # test split: ignored
    return truth


@pytest.mark.parametrize("year", [2012, 2015])
def test_stereo(tmp_path: Path, year: int, write_image, rng, mkparent) -> None:
    truth = _release(tmp_path, year, write_image, rng, mkparent)
    for root in (tmp_path, tmp_path / "training"):
        dataset = KITTIStereo(root, year=year)
        assert len(dataset) == 2
    sample = dataset[1]
    expected = truth["000001"]
    assert sample["name"] == "000001_10.png"
    np.testing.assert_array_equal(sample["image0"], expected["images"][0])
    np.testing.assert_array_equal(sample["image1"], expected["images"][1])
    np.testing.assert_array_equal(sample["valid"], expected["occ"])
    np.testing.assert_array_equal(sample["valid_noc"], expected["noc"])
    np.testing.assert_array_equal(sample["disparity"],
                                  np.where(expected["occ"], expected["disparity"], 0))


@pytest.mark.parametrize("year", [2012, 2015])
def test_flow(tmp_path: Path, year: int, write_image, rng, mkparent) -> None:
    truth = _release(tmp_path, year, write_image, rng, mkparent, count=1)
    sample = KITTIFlow(tmp_path, year=year)[0]
    expected = truth["000000"]
    np.testing.assert_array_equal(sample["image0"], expected["images"][0])
    np.testing.assert_array_equal(sample["image1"], expected["images"][2])
    np.testing.assert_array_equal(sample["valid"], expected["occ"])
    np.testing.assert_array_equal(sample["valid_noc"], expected["noc"])
    np.testing.assert_array_equal(sample["flow"],
                                  np.where(expected["occ"][..., None], expected["flow"], 0))


def test_wrong_layout(tmp_path: Path, write_image, rng, mkparent) -> None:
    _release(tmp_path, 2012, write_image, rng, mkparent, count=1)
    with pytest.raises(UserError, match="expected the KITTI 2015 folder with training/image_2"):
        KITTIStereo(tmp_path, year=2015)
    with pytest.raises(UserError, match="no such directory"):
        KITTIFlow(tmp_path / "nope")
    with pytest.raises(UserError, match="2012 or 2015"):
        KITTIFlow(tmp_path, year=2013)
    with pytest.raises(UserError, match="2012 or 2015, got 'abc'"):  # a text dataset option
        KITTIStereo(tmp_path, year="abc")
    assert len(KITTIStereo(tmp_path, year="2012")) == 1
