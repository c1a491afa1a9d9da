from __future__ import annotations

import numpy as np
import pytest
import torch

from crossview.data.synthetic.dataset import sample_generator
from crossview.data.synthetic.multiview import (
    MultiViewConfig,
    SyntheticMultiView,
    look_at,
    random_multiview,
)
from crossview.geometry.warp import backward_warp

SMOOTH = MultiViewConfig(size=(40, 48), views=3, texel_scale=(0.25, 0.5))


def _reproject(s: dict, a: int, b: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Pixels of view a lifted with their depth and projected into view b: (x, y, z_b)."""
    h, w = s["depth"].shape[1:]
    xs, ys = np.meshgrid(np.arange(w), np.arange(h))
    pix = np.stack([xs, ys, np.ones_like(xs)]).reshape(3, -1).astype(np.float64)
    cam = np.linalg.solve(s["K"][a].astype(np.float64), pix) * s["depth"][a].reshape(1, -1)
    world = np.linalg.inv(s["viewmats"][a].astype(np.float64)) @ np.vstack([cam, np.ones(h * w)])
    cam_b = (s["viewmats"][b].astype(np.float64) @ world)[:3]
    p = s["K"][b].astype(np.float64) @ cam_b
    return (p[0] / p[2]).reshape(h, w), (p[1] / p[2]).reshape(h, w), cam_b[2].reshape(h, w)


@pytest.mark.parametrize("index", range(2))
def test_depth_and_cameras_reproject_views_onto_each_other(index: int) -> None:
    """Lifting view a with its depth and projecting into view b lands on view b's surface
    (depth agrees) for most pixels, and there the images agree."""
    s = random_multiview(sample_generator("multiview", "train", 0, index), SMOOTH)
    h, w = SMOOTH.size
    for a, b in ((0, 1), (1, 2), (2, 0)):
        x, y, z = _reproject(s, a, b)
        flow = torch.from_numpy(np.stack([x - np.arange(w), y - np.arange(h)[:, None]]))[None]
        depth_b, inside = backward_warp(torch.from_numpy(s["depth"][b])[None, None].double(),
                                        flow)
        seen = (inside[0].numpy() & s["valid"][a]
                & (np.abs(depth_b[0, 0].numpy() - z) < 1e-3 * z))
        assert seen.mean() > 0.2
        image_b, _ = backward_warp(torch.from_numpy(s["images"][b]).permute(2, 0, 1)[None],
                                   flow.float())
        error = np.abs(image_b[0].permute(1, 2, 0).numpy() - s["images"][a]).mean(-1)[seen]
        assert np.median(error) < 0.5


def test_cameras_vary_and_are_rigid() -> None:
    s = random_multiview(sample_generator("multiview", "train", 1, 0),
                         MultiViewConfig(size=(32, 32), views=4))
    assert s["images"].shape == (4, 32, 32, 3) and s["depth"].shape == (4, 32, 32)
    assert len(set(np.round(s["K"][:, 0, 0], 3))) == 4  # every view has its own zoom
    np.testing.assert_array_equal(s["K"][:, 2], np.tile([0.0, 0.0, 1.0], (4, 1)))
    r = s["viewmats"][:, :3, :3].astype(np.float64)
    np.testing.assert_allclose(r @ r.transpose(0, 2, 1), np.broadcast_to(np.eye(3), r.shape),
                               atol=1e-5)
    np.testing.assert_allclose(np.linalg.det(r), 1.0, atol=1e-5)
    np.testing.assert_array_equal(s["viewmats"][:, 3], np.tile([0.0, 0.0, 0.0, 1.0], (4, 1)))
    assert (s["depth"][s["valid"]] > 0).all() and s["valid"].mean() > 0.9


def test_look_at_puts_the_target_on_the_optical_axis() -> None:
    m = look_at(np.array([1.0, -0.5, -4.0]), np.array([0.1, 0.2, 0.3]), roll=0.1)
    target_cam = m @ np.array([0.1, 0.2, 0.3, 1.0])
    np.testing.assert_allclose(target_cam[:2], 0.0, atol=1e-12)
    assert target_cam[2] > 0


def test_dataset_layout_and_determinism() -> None:
    config = MultiViewConfig(size=(32, 32), views=3)
    a = SyntheticMultiView(2, seed=4, config=config)[1]
    b = SyntheticMultiView(2, seed=4, config=config)[1]
    for key in a:
        assert torch.equal(a[key], b[key]), key
    assert a["images"].shape == (3, 3, 32, 32) and a["images"].dtype == torch.float32
    assert a["K"].shape == (3, 3, 3) and a["viewmats"].shape == (3, 4, 4)
    assert a["depth"].shape == (3, 32, 32) and a["valid"].dtype == torch.bool


def test_config_errors() -> None:
    with pytest.raises(ValueError, match="views"):
        MultiViewConfig(views=0)
    with pytest.raises(ValueError, match="orbit"):
        MultiViewConfig(orbit=80.0)
