"""Street layouts (``street_probability``): the default stream is unchanged, the ground fills the
lower image with the largest labels at the bottom, and a driving camera's flow diverges."""

from __future__ import annotations

import numpy as np
import pytest

from crossview.data.synthetic.dataset import sample_generator
from crossview.data.synthetic.flow import FlowConfig, flow_scene, random_flow_pair, render_flow
from crossview.data.synthetic.multiview import MultiViewConfig
from crossview.data.synthetic.scene import render
from crossview.data.synthetic.stereo import StereoConfig, random_stereo_pair, stereo_scene

STEREO = StereoConfig(size=(64, 128), street_probability=1.0)
FLOW = FlowConfig(size=(64, 128), street_probability=1.0)


def test_default_stream_is_unchanged() -> None:
    # golden values of these samples, recorded from the code before street layouts existed
    s = random_stereo_pair(sample_generator("stereo", "train", 5, 2), StereoConfig(size=(32, 48)))
    np.testing.assert_allclose(s["image0"].astype(np.float64).sum(), 672424.4793024063, rtol=1e-6)
    np.testing.assert_allclose(s["disparity"].astype(np.float64).sum(), 1084.055978357792,
                               rtol=1e-6)
    assert int(s["valid_noc"].sum()) == 1435 and int(s["valid_noc1"].sum()) == 1407
    f = random_flow_pair(sample_generator("flow", "train", 5, 2), FlowConfig(size=(32, 48)))
    np.testing.assert_allclose(f["image1"].astype(np.float64).sum(), 464708.0459063328, rtol=1e-6)
    np.testing.assert_allclose(f["flow"].astype(np.float64).sum(axis=(0, 1)),
                               [2203.48472966, 1115.97290878], rtol=1e-6)
    assert int(f["valid_noc"].sum()) == 1199 and int(f["valid_noc1"].sum()) == 1169
    explicit = random_flow_pair(sample_generator("flow", "train", 5, 2),
                                FlowConfig(size=(32, 48), street_probability=0.0))
    for key, value in f.items():
        np.testing.assert_array_equal(explicit[key], value, err_msg=key)


def test_ground_fills_the_lower_image_with_the_largest_disparities() -> None:
    bottom, middle, ground = [], [], []
    for index in range(4):
        rng = sample_generator("stereo", "train", 0, index)
        layers, left, _, _, _ = stereo_scene(rng, STEREO)
        view = render(layers, left, STEREO.size)
        s = random_stereo_pair(sample_generator("stereo", "train", 0, index), STEREO)
        h = STEREO.size[0]
        bottom.append(s["disparity"][-h // 8:].mean())
        middle.append(s["disparity"][h // 2 - h // 16:h // 2 + h // 16].mean())
        ground.append((view.layer[-h // 4:] == 0).mean())  # layer 0 is the ground
        assert (view.layer[: int(0.25 * h)] == 0).sum() == 0  # the horizon is lower
    assert np.mean(bottom) > 2 * np.mean(middle)
    assert np.mean(ground) > 0.5


def _focus_of_expansion(scene) -> np.ndarray:
    """Where frame 1's camera centre projects in frame 0: ``[2]`` pixels."""
    e = scene.camera1.world_to_camera
    centre = -e[:3, :3].T @ e[:3, 3]
    assert centre[2] > 0  # the camera drives forward
    p = scene.camera0.K @ centre
    return p[:2] / p[2]


@pytest.mark.parametrize("index", range(3))
def test_flow_diverges_from_the_focus_of_expansion_and_grows_downwards(index: int) -> None:
    scene = flow_scene(sample_generator("flow", "train", 1, index), FLOW)
    s = render_flow(scene, FLOW.size)
    h, w = FLOW.size
    xs, ys = np.meshgrid(np.arange(w), np.arange(h))
    foe = _focus_of_expansion(scene)
    outward = s["flow"][..., 0] * (xs - foe[0]) + s["flow"][..., 1] * (ys - foe[1])
    assert outward[s["valid"]].mean() > 0 and (outward[s["valid"]] > 0).mean() > 0.7
    magnitude = np.linalg.norm(s["flow"], axis=-1)
    assert magnitude[-h // 8:].mean() > 2 * magnitude[h // 2 - h // 16:h // 2 + h // 16].mean()
    assert magnitude.max() <= FLOW.flow_limit * 1.05


def test_probability_mixes_layouts_and_is_checked() -> None:
    half = StereoConfig(size=(32, 64), street_probability=0.5)
    # only a street has two unbounded layers (ground and sky)
    unbounded = [sum(layer.shape is None for layer in stereo_scene(
        sample_generator("stereo", "train", 2, i), half)[0]) for i in range(12)]
    assert set(unbounded) == {1, 2}
    with pytest.raises(ValueError, match="street_probability"):
        FlowConfig(street_probability=-0.1)
    with pytest.raises(ValueError, match="street_probability"):
        MultiViewConfig(street_probability=0.5)
