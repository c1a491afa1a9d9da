from __future__ import annotations

import numpy as np
import pytest
import torch

from crossview.data.synthetic.dataset import sample_generator
from crossview.data.synthetic.textures import HELDOUT_IMAGES, TRAIN_IMAGES
from crossview.data.synthetic.warps import (
    SyntheticWarps,
    ThinPlateSpline,
    WarpConfig,
    apply_homography,
    homography_from_points,
    random_warp_pair,
    sample_keypoints,
)
from crossview.geometry.warp import backward_warp

# a small crop magnified onto the output: smooth images, so resampling adds little error
SMOOTH = WarpConfig(size=(48, 64), crop=(0.02, 0.04), photometric=False)


def _t(array: np.ndarray) -> torch.Tensor:
    return torch.from_numpy(array).permute(2, 0, 1)[None]


def _warp_error(s: dict, flow: np.ndarray) -> np.ndarray:
    warped, _ = backward_warp(_t(s["image1"]), _t(flow))
    return (warped[0] - _t(s["image0"])[0]).abs().mean(0).numpy()[s["valid"]]


def test_homography_maps_the_four_points() -> None:
    rng = np.random.default_rng(0)
    src = rng.uniform(0, 50, (4, 2))
    dst = src + rng.uniform(-5, 5, (4, 2))
    x, y = apply_homography(homography_from_points(src, dst), src[:, 0], src[:, 1])
    np.testing.assert_allclose(np.stack([x, y], -1), dst, atol=1e-9)


def test_thin_plate_spline_interpolates_and_reproduces_affine_maps() -> None:
    rng = np.random.default_rng(1)
    controls = rng.uniform(0, 30, (9, 2))
    disp = rng.normal(0, 2, (9, 2))
    x, y = ThinPlateSpline.fit(controls, disp)(controls[:, 0], controls[:, 1])
    np.testing.assert_allclose(np.stack([x, y], -1), controls + disp, atol=1e-8)
    # an affine displacement field is reproduced everywhere (zero bending energy)
    a = np.array([[0.1, -0.05], [0.02, 0.08]])
    affine = ThinPlateSpline.fit(controls, controls @ a.T + [1.0, -2.0])
    pts = rng.uniform(0, 30, (20, 2))
    x, y = affine(pts[:, 0], pts[:, 1])
    np.testing.assert_allclose(np.stack([x, y], -1), pts + pts @ a.T + [1.0, -2.0], atol=1e-7)


@pytest.mark.parametrize("split", ["train", "heldout"])
def test_warping_image1_with_flow_reproduces_image0(split: str) -> None:
    for index in range(3):
        s = random_warp_pair(sample_generator("warp", split, 0, index), SMOOTH, split)
        exact = _warp_error(s, s["flow"])
        assert s["valid"].mean() > 0.5
        assert exact.mean() < 0.5 and _warp_error(s, s["flow"] + 0.5).mean() > 5 * exact.mean()


def test_keypoints_follow_the_flow() -> None:
    config = WarpConfig(size=(32, 40), num_keypoints=12)
    s = random_warp_pair(sample_generator("warp", "train", 1, 0), config)
    k0, k1 = s["keypoints0"], s["keypoints1"]
    assert k0.shape == k1.shape == (12, 2) and k0.dtype == np.float32
    xs, ys = k0[:, 0].astype(int), k0[:, 1].astype(int)
    assert s["valid"][ys, xs].all()
    np.testing.assert_allclose(k1 - k0, s["flow"][ys, xs], atol=1e-5)
    assert len({tuple(p) for p in k0.tolist()}) == 12  # distinct when enough pixels are valid
    with pytest.raises(ValueError, match="valid"):
        sample_keypoints(s["flow"], np.zeros((32, 40), bool), 3, np.random.default_rng(0))


def test_heldout_photographs_are_disjoint_from_training() -> None:
    assert not set(HELDOUT_IMAGES) & set(TRAIN_IMAGES)


def test_dataset_tensors_and_determinism() -> None:
    ds = SyntheticWarps(4, seed=3, config=WarpConfig(size=(24, 32), num_keypoints=5))
    a, b = ds[1], SyntheticWarps(4, seed=3, config=WarpConfig(size=(24, 32),
                                                               num_keypoints=5))[1]
    for key in a:
        assert torch.equal(a[key], b[key]), key
    assert a["image0"].shape == (3, 24, 32) and a["flow"].shape == (2, 24, 32)
    assert a["keypoints0"].shape == (5, 2) and a["valid"].dtype == torch.bool


def test_config_errors() -> None:
    with pytest.raises(ValueError, match="tps_grid"):
        WarpConfig(tps_grid=1)
    with pytest.raises(ValueError, match="crop"):
        WarpConfig(crop=(0.5, 1.5))
