from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest
import torch

from crossview.data.synthetic.dataset import sample_generator
from crossview.data.synthetic.flow import FlowConfig
from crossview.data.synthetic.scene import Camera, Layer, Shape, project, render, translation
from crossview.data.synthetic.stereo import (
    StereoConfig,
    SyntheticStereo,
    random_stereo_pair,
    render_stereo,
    stereo_scene,
)
from crossview.geometry.warp import backward_warp, warp_by_disparity

SMALL = StereoConfig(size=(40, 80))
SMOOTH = StereoConfig(size=(40, 80), texel_scale=(0.25, 0.5))
STREET = pytest.mark.parametrize("street", [0.0, 1.0])  # street_probability


def _t(image: np.ndarray) -> torch.Tensor:
    return torch.from_numpy(image).permute(2, 0, 1)[None]


def _warp_error(sample: dict, disparity: np.ndarray) -> np.ndarray:
    warped, _ = warp_by_disparity(_t(sample["image1"]), torch.from_numpy(disparity)[None])
    error = (warped[0] - _t(sample["image0"])[0]).abs().mean(0).numpy()
    return error[sample["valid_noc"]]


def _fronto_layer(k: np.ndarray, pixel: tuple[int, int], depth: float, texture: np.ndarray,
                  shape: Shape | None) -> Layer:
    origin = depth * np.linalg.solve(k, np.array([pixel[0], pixel[1], 1.0]))
    axes = np.diag([depth / k[0, 0], depth / k[1, 1], 0.0])[:, :2]
    return Layer(origin, axes, texture, np.array([[1.0, 0.0, 3.0], [0.0, 1.0, 2.0]]), shape)


class TestExactness:
    def test_integer_disparities_are_exact_and_occlusions_hand_computed(self) -> None:
        """Fronto-parallel background (d = 2) and square (d = 5): every texel lands on a pixel."""
        h, w, f, baseline = 16, 32, 20.0, 0.5  # f * B = 10
        k = np.array([[f, 0.0, 15.0], [0.0, f, 7.0], [0.0, 0.0, 1.0]])
        rng = np.random.default_rng(0)
        background = _fronto_layer(k, (16, 8), 10.0 / 2, rng.uniform(0, 255, (40, 60, 3)), None)
        square = _fronto_layer(k, (16, 8), 10.0 / 5, rng.uniform(0, 255, (20, 20, 3)),
                               Shape(radius=4.5, norm=np.inf))
        layers = [background, square]
        sample = render_stereo(layers, Camera(k, np.eye(4)),
                               Camera(k, translation([-baseline, 0, 0])), (h, w), f * baseline)
        xs = np.arange(w)[None, :]
        rows = (np.arange(h) >= 4) & (np.arange(h) <= 12)
        in_square = rows[:, None] & (xs >= 12) & (xs <= 20)
        np.testing.assert_allclose(sample["disparity"], np.where(in_square, 5.0, 2.0), atol=1e-5)
        in_square1 = rows[:, None] & (xs >= 7) & (xs <= 15)
        np.testing.assert_allclose(sample["disparity1"], np.where(in_square1, 5.0, 2.0),
                                   atol=1e-5)
        # left: background columns 9..11 beside the square are hidden in the right view
        occluded = rows[:, None] & (xs >= 9) & (xs <= 11)
        np.testing.assert_array_equal(sample["valid_noc"], ~occluded & (xs >= 2))
        # right: background columns 16..18 are hidden in the left view; x + d must be < w
        occluded1 = rows[:, None] & (xs >= 16) & (xs <= 18)
        right_edge = xs + np.where(in_square1, 5, 2) <= w - 1
        np.testing.assert_array_equal(sample["valid_noc1"], ~occluded1 & right_edge)
        error = _warp_error(sample, sample["disparity"])
        assert error.size > 0.8 * h * w * 0.7 and error.max() < 1e-2

    @STREET
    @pytest.mark.parametrize("index", range(4))
    def test_warping_right_view_reproduces_left(self, index: int, street: float) -> None:
        sample = random_stereo_pair(sample_generator("stereo", "train", 0, index),
                                    replace(SMOOTH, street_probability=street))
        exact = _warp_error(sample, sample["disparity"])
        shifted = _warp_error(sample, sample["disparity"] + 0.5)
        assert sample["valid_noc"].mean() > 0.5
        assert exact.mean() < 0.3
        assert shifted.mean() > 3 * exact.mean()

    @STREET
    @pytest.mark.parametrize("index", range(3))
    def test_left_right_disparities_agree(self, index: int, street: float) -> None:
        """d1(x - d(x)) == d(x) on non-occluded pixels (disparity is affine per plane)."""
        sample = random_stereo_pair(sample_generator("stereo", "train", 1, index),
                                    replace(SMALL, street_probability=street))
        d1 = torch.from_numpy(sample["disparity1"])[None, None]
        flow = torch.zeros(1, 2, *sample["disparity"].shape)
        flow[0, 0] = -torch.from_numpy(sample["disparity"])
        back, _ = backward_warp(d1, flow)
        noc = sample["valid_noc"]
        np.testing.assert_allclose(back[0, 0].numpy()[noc], sample["disparity"][noc], atol=2e-3)

    @STREET
    def test_disparity_is_the_projection_shift(self, street: float) -> None:
        rng = sample_generator("stereo", "train", 2, 0)
        layers, left, right, f, baseline = stereo_scene(
            rng, replace(SMALL, street_probability=street))
        view0 = render(layers, left, SMALL.size)
        x, y, _ = project(layers, view0, right)
        h, w = SMALL.size
        xs, ys = np.meshgrid(np.arange(w), np.arange(h))
        np.testing.assert_allclose(xs - x, f * baseline * view0.inverse_depth, atol=1e-4)
        np.testing.assert_allclose(y, ys, atol=1e-4)  # float32 rendering


class TestSamples:
    @STREET
    def test_keys_shapes_and_ranges(self, street: float) -> None:
        config = StereoConfig(size=(48, 64), max_disparity=12.0, street_probability=street)
        for index in range(5):
            s = random_stereo_pair(sample_generator("stereo", "train", 3, index), config)
            assert s["image0"].shape == s["image1"].shape == (48, 64, 3)
            for key in ("disparity", "disparity1", "valid_noc", "valid_noc1", "valid", "valid1"):
                assert s[key].shape == (48, 64)
            assert s["valid"].all() and s["valid1"].all()
            assert s["valid_noc"].dtype == np.bool_
            for key in ("disparity", "disparity1"):
                assert s[key].min() >= 0.25 - 1e-4 and s[key].max() <= 12.0 + 1e-3
            assert s["image0"].min() >= 0.0 and s["image0"].max() <= 255.0

    @STREET
    def test_dataset_is_deterministic_by_index(self, street: float) -> None:
        config = replace(SMALL, street_probability=street)
        ds = SyntheticStereo(6, seed=7, config=config)
        a, b = ds[4], SyntheticStereo(6, seed=7, config=config)[4]
        assert a.keys() == b.keys()
        for key in a:
            assert torch.equal(a[key], b[key]), key
        assert not torch.equal(ds[3]["image0"], a["image0"])
        heldout = SyntheticStereo(6, seed=7, config=config, split="heldout")[4]
        assert not torch.equal(heldout["image0"], a["image0"])
        assert a["image0"].shape == (3, 40, 80) and a["image0"].dtype == torch.float32
        assert a["disparity"].shape == (40, 80) and a["valid_noc"].dtype == torch.bool

    def test_errors(self) -> None:
        with pytest.raises(IndexError):
            SyntheticStereo(2, config=SMALL)[2]
        with pytest.raises(ValueError, match="split"):
            SyntheticStereo(2, split="test")
        with pytest.raises(ValueError, match="size"):
            StereoConfig(size=(1, 10))
        with pytest.raises(ValueError, match="max_disparity"):
            StereoConfig(max_disparity=0.5)
        with pytest.raises(ValueError, match="texel_scale"):
            StereoConfig(texel_scale=(2.0, 1.0))
        with pytest.raises(ValueError, match="street_probability"):
            StereoConfig(street_probability=1.5)
        with pytest.raises(TypeError, match="StereoConfig"):
            SyntheticStereo(2, config=FlowConfig())
