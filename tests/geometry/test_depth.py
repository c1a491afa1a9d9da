"""``crossview.geometry.depth``: depth from disparity and points from depth against hand
computations and the pinhole projection, and the depth-edge mask on small cases."""

from __future__ import annotations

import numpy as np
import pytest
import torch

import crossview
from crossview.geometry.depth import depth_edge_mask, depth_to_points, disparity_to_depth


def test_depth_by_hand() -> None:
    # f = 700 px, B = 0.54 m: d = 35 px -> 700 * 0.54 / 35 = 10.8 m; with doffs 5: / 40 = 9.45
    disparity = torch.tensor([[35.0, 70.0], [0.0, -1.0]], dtype=torch.float64)
    assert disparity_to_depth(disparity, 700.0, 0.54).flatten().tolist() == pytest.approx(
        [10.8, 5.4, 0.0, 0.0])
    assert disparity_to_depth(disparity, 700.0, 0.54, doffs=5.0).flatten().tolist() == (
        pytest.approx([9.45, 700 * 0.54 / 75, 700 * 0.54 / 5, 700 * 0.54 / 4]))


def test_depth_is_zero_without_a_finite_depth_and_has_finite_gradients() -> None:
    disparity = torch.tensor([3.0, 0.0, -2.0], requires_grad=True)
    depth = disparity_to_depth(disparity, 10.0, 1.0, doffs=1.0)
    depth.sum().backward()
    assert depth.tolist() == pytest.approx([2.5, 10.0, 0.0])
    assert torch.isfinite(disparity.grad).all()
    assert disparity.grad[0] == pytest.approx(-10.0 / 16)  # d/dd f B / (d + doffs)


def test_points_reproject_onto_their_pixels() -> None:
    generator = torch.Generator().manual_seed(0)
    depth = torch.rand(2, 5, 7, generator=generator, dtype=torch.float64) * 9 + 1
    focal, cx, cy = 321.0, 3.2, 1.7
    points = depth_to_points(depth, focal, cx, cy)
    assert points.shape == (2, 5, 7, 3)
    x, y, z = points.unbind(-1)
    v, u = torch.meshgrid(torch.arange(5.0, dtype=torch.float64),
                          torch.arange(7.0, dtype=torch.float64), indexing="ij")
    torch.testing.assert_close(focal * x / z + cx, u.expand_as(x), rtol=0, atol=1e-12)
    torch.testing.assert_close(focal * y / z + cy, v.expand_as(y), rtol=0, atol=1e-12)
    torch.testing.assert_close(z, depth)


def test_a_point_by_hand() -> None:
    # pixel (u, v) = (4, 1), Z = 2, f = 2, c = (1, 0): X = (4 - 1) * 2 / 2 = 3, Y = 1
    depth = torch.zeros(2, 5)
    depth[1, 4] = 2.0
    assert depth_to_points(depth, 2.0, 1.0, 0.0)[1, 4].tolist() == [3.0, 1.0, 2.0]


def test_numpy_in_numpy_out() -> None:
    """As the ``estimate_*`` functions, depth and points take numpy arrays (read-only ones
    too) and give back numpy arrays, equal to the tensor results."""
    disparity = np.array([[35.0, 70.0], [0.0, -1.0]], np.float32)
    disparity.flags.writeable = False
    depth = crossview.disparity_to_depth(disparity, 700.0, 0.54, doffs=5.0)
    assert isinstance(depth, np.ndarray) and depth.dtype == np.float32
    np.testing.assert_array_equal(
        depth, disparity_to_depth(torch.from_numpy(disparity.copy()), 700.0, 0.54, 5.0).numpy())
    points = crossview.depth_to_points(depth, 700.0, 0.5, 0.5)
    assert isinstance(points, np.ndarray) and points.shape == (2, 2, 3)
    np.testing.assert_array_equal(points, depth_to_points(torch.from_numpy(depth), 700.0, 0.5,
                                                          0.5).numpy())
    with pytest.raises(TypeError, match="disparity must hold floats"):
        crossview.disparity_to_depth(np.ones(2, np.int64), 1.0, 1.0)


def test_top_level_names() -> None:
    assert crossview.disparity_to_depth is disparity_to_depth
    assert crossview.depth_to_points is depth_to_points


def test_depth_edges_both_sides_of_a_jump_only() -> None:
    depth = torch.ones(4, 6)
    depth[:, 3:] = 2.0  # a vertical edge between columns 2 and 3
    depth[0, 0] = 1.01  # a small step stays
    edge = depth_edge_mask(depth, 0.05)
    expected = torch.zeros(4, 6, dtype=torch.bool)
    expected[:, 2:4] = True
    assert torch.equal(edge, expected)
    depth[2, 1] = 5.0  # a lone flying pixel marks itself and its four neighbours
    edge = depth_edge_mask(depth, 0.05)
    assert edge[2, 1] and edge[1, 1] and edge[3, 1] and edge[2, 0] and not edge[0, 1]


@pytest.mark.parametrize("call,error", [
    (lambda: disparity_to_depth(torch.ones(2), 0.0, 1.0), ValueError),
    (lambda: disparity_to_depth(torch.ones(2), 1.0, -1.0), ValueError),
    (lambda: disparity_to_depth(torch.ones(2, dtype=torch.int64), 1.0, 1.0), TypeError),
    (lambda: depth_to_points(torch.ones(3), 1.0, 0.0, 0.0), ValueError),
    (lambda: depth_to_points(torch.ones(2, 2), -1.0, 0.0, 0.0), ValueError),
    (lambda: disparity_to_depth(torch.ones(2), float("nan"), 1.0), ValueError),
    (lambda: disparity_to_depth(torch.ones(2), 1.0, float("inf")), ValueError),
    (lambda: disparity_to_depth(torch.ones(2), 1.0, 1.0, float("nan")), ValueError),
    (lambda: depth_to_points(torch.ones(2, 2), float("nan"), 0.0, 0.0), ValueError),
    (lambda: depth_to_points(torch.ones(2, 2), 1.0, float("inf"), 0.0), ValueError),
    (lambda: depth_to_points(torch.ones(2, 2), 1.0, 0.0, float("nan")), ValueError),
    (lambda: depth_edge_mask(torch.ones(2, 2), 0.0), ValueError),
])
def test_bad_arguments(call, error) -> None:
    with pytest.raises(error):
        call()
