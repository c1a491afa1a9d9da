from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest
import torch

from crossview.data.synthetic.dataset import sample_generator
from crossview.data.synthetic.flow import (
    FlowConfig,
    SyntheticFlow,
    flow_scene,
    random_flow_pair,
    render_flow,
)
from crossview.data.synthetic.scene import Camera, render
from crossview.geometry.warp import backward_warp

SMALL = FlowConfig(size=(40, 80))
SMOOTH = FlowConfig(size=(40, 80), texel_scale=(0.25, 0.5))
STREET = pytest.mark.parametrize("street", [0.0, 1.0])  # street_probability


def _t(array: np.ndarray) -> torch.Tensor:
    return torch.from_numpy(array).permute(2, 0, 1)[None]


def _warp_error(target: np.ndarray, reference: np.ndarray, flow: np.ndarray,
                mask: np.ndarray) -> np.ndarray:
    warped, _ = backward_warp(_t(target), _t(flow))
    return (warped[0] - _t(reference)[0]).abs().mean(0).numpy()[mask]


class TestExactness:
    @STREET
    @pytest.mark.parametrize("index", range(4))
    def test_warping_frame1_with_flow_reproduces_frame0(self, index: int, street: float) -> None:
        # streets at 80x160: at 40x80 the ground from the bottom row to the street's end 3-10x
        # farther fills ~20 rows, its texture at the pixel scale (resampling error, not label
        # error); this check passed 25/30 samples at 40x80 for both layouts, 27/30 at 80x160
        config = replace(SMOOTH, street_probability=street, size=(80, 160) if street else
                         SMOOTH.size)
        s = random_flow_pair(sample_generator("flow", "train", 0, index), config)
        exact = _warp_error(s["image1"], s["image0"], s["flow"], s["valid_noc"])
        shifted = _warp_error(s["image1"], s["image0"], s["flow"] + 0.5, s["valid_noc"])
        assert s["valid_noc"].mean() > 0.5
        assert exact.mean() < 0.3 and shifted.mean() > 3 * exact.mean()
        back = _warp_error(s["image0"], s["image1"], s["flow_backward"], s["valid_noc1"])
        assert back.mean() < 0.3

    @STREET
    @pytest.mark.parametrize("index", range(3))
    def test_forward_backward_consistency(self, index: int, street: float) -> None:
        """flow_backward(p + flow(p)) == -flow(p) wherever p's point is seen in frame 1."""
        s = random_flow_pair(sample_generator("flow", "train", 1, index),
                             replace(SMALL, street_probability=street))
        back, _ = backward_warp(_t(s["flow_backward"]), _t(s["flow"]))
        residual = (back[0] + _t(s["flow"])[0]).abs().amax(0).numpy()[s["valid_noc"]]
        assert residual.max() < 2e-2

    @STREET
    def test_static_scene_has_zero_flow(self, street: float) -> None:
        scene = flow_scene(sample_generator("flow", "train", 2, 0),
                           replace(SMALL, street_probability=street))
        view = render(scene.layers, scene.camera0, SMALL.size)
        still = type(scene)(scene.layers, scene.camera0, Camera(scene.camera0.K, np.eye(4)),
                            [None] * len(scene.layers))
        s = render_flow(still, SMALL.size)
        np.testing.assert_allclose(s["flow"], 0.0, atol=1e-4)  # float32 rendering
        np.testing.assert_array_equal(s["image1"], view.image)
        assert s["valid_noc"].all()


class TestSamples:
    @STREET
    def test_keys_shapes_and_flow_bound(self, street: float) -> None:
        config = FlowConfig(size=(48, 64), max_flow=6.0, street_probability=street)
        moving = 0
        for index in range(6):
            s = random_flow_pair(sample_generator("flow", "train", 3, index), config)
            assert s["flow"].shape == s["flow_backward"].shape == (48, 64, 2)
            for key in ("valid", "valid1", "valid_noc", "valid_noc1"):
                assert s[key].shape == (48, 64) and s[key].dtype == np.bool_
            assert s["valid"].all() and s["valid1"].all()
            magnitude = np.linalg.norm(s["flow"], axis=-1)
            assert magnitude.max() <= 6.0 * 1.05
            moving += magnitude.max() > 0.5
            # objects move independently: the flow field is not one global motion
            assert np.unique(np.round(s["flow"][..., 0], 3)).size > 10
        assert moving >= 5

    @STREET
    def test_dataset_is_deterministic_by_index(self, street: float) -> None:
        config = replace(SMALL, street_probability=street)
        a = SyntheticFlow(3, seed=5, config=config)[2]
        b = SyntheticFlow(3, seed=5, config=config)[2]
        for key in a:
            assert torch.equal(a[key], b[key]), key
        assert a["flow"].shape == (2, 40, 80) and a["image1"].shape == (3, 40, 80)
        assert not torch.equal(SyntheticFlow(3, seed=6, config=config)[2]["flow"], a["flow"])

    def test_errors(self) -> None:
        with pytest.raises(ValueError, match="max_flow"):
            FlowConfig(max_flow=0.0)
        with pytest.raises(ValueError, match="objects"):
            FlowConfig(objects=(3, 2))
