"""``WarpConfig.shift``: the default stream is unchanged, a shift keeps the correspondence
exact and moves more content across the image sides."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from crossview.data.synthetic.dataset import sample_generator
from crossview.data.synthetic.warps import WarpConfig, random_warp_pair
from crossview.geometry.warp import backward_warp

SMOOTH = WarpConfig(size=(48, 64), crop=(0.02, 0.04), photometric=False)


def test_default_stream_is_unchanged() -> None:
    # golden values of this sample, recorded from the code before ``shift`` existed
    config = WarpConfig(size=(32, 40), num_keypoints=6)
    s = random_warp_pair(sample_generator("warp", "train", 5, 2), config)
    np.testing.assert_array_equal(
        s["keypoints0"], [[38, 3], [27, 4], [5, 20], [18, 15], [19, 16], [12, 30]])
    np.testing.assert_allclose(
        s["keypoints1"], [[38.522835, 2.1305375], [28.330025, 1.4329057], [3.550059, 20.487492],
                          [15.895523, 13.688902], [17.288961, 14.817561], [11.001782, 29.869867]],
        atol=1e-4)
    assert int(s["valid"].sum()) == 1049
    np.testing.assert_allclose(s["flow"].astype(np.float64).sum(), -815.0400509, rtol=1e-5)
    explicit = random_warp_pair(sample_generator("warp", "train", 5, 2),
                                WarpConfig(size=(32, 40), num_keypoints=6, shift=0.0))
    for key, value in s.items():
        np.testing.assert_array_equal(explicit[key], value, err_msg=key)


def _warp_error(s: dict) -> np.ndarray:
    def t(array: np.ndarray) -> torch.Tensor:
        return torch.from_numpy(array).permute(2, 0, 1)[None]

    warped, _ = backward_warp(t(s["image1"]), t(s["flow"]))
    return (warped[0] - t(s["image0"])[0]).abs().mean(0).numpy()[s["valid"]]


def test_shift_moves_only_the_source_view_and_keeps_the_flow_exact() -> None:
    shifted = WarpConfig(size=(48, 64), crop=(0.02, 0.04), photometric=False, shift=0.2)
    for index in range(3):
        plain = random_warp_pair(sample_generator("warp", "train", 0, index), SMOOTH)
        s = random_warp_pair(sample_generator("warp", "train", 0, index), shifted)
        # same photograph, crop, H1: image1 is the same picture, image0 and the flow are not
        np.testing.assert_array_equal(s["image1"], plain["image1"])
        assert np.abs(s["flow"] - plain["flow"]).max() > 1.0
        assert s["valid"].mean() > 0.3 and _warp_error(s).mean() < 0.5


def _border_share(shift: float, far: float) -> tuple[float, float]:
    """Share of keypoints that are near a side (within a fifth of the size) *and* move at
    least ``far`` of the size, and the border keypoints' mean displacement / size."""
    size, count = 60, 64
    config = WarpConfig(size=(size, size), num_keypoints=count, photometric=False, shift=shift)
    hits, lengths = [], []
    for index in range(30):
        s = random_warp_pair(sample_generator("warp", "train", 1, index), config)
        kp, length = s["keypoints0"], np.linalg.norm(s["keypoints1"] - s["keypoints0"], axis=-1)
        border = (kp.min(-1) < size / 5) | (kp.max(-1) > size - 1 - size / 5)
        hits.append(border & (length >= far * size))
        lengths.append(length[border] / size)
    return float(np.concatenate(hits).mean()), float(np.concatenate(lengths).mean())


def test_shift_gives_border_keypoints_larger_displacements() -> None:
    share0, mean0 = _border_share(0.0, far=1 / 12)
    share1, mean1 = _border_share(0.2, far=1 / 12)
    assert share1 > 1.3 * share0 and mean1 > 1.3 * mean0


def test_shift_errors() -> None:
    for bad in (-0.1, 1.0):
        with pytest.raises(ValueError, match="shift"):
            WarpConfig(shift=bad)
