from __future__ import annotations

import math

import numpy as np
import pytest

from crossview.data.synthetic.scene import (
    Camera,
    Layer,
    Shape,
    inverse_depth_at,
    render,
    rigid_about,
    rotation,
    sample_texture,
)

K = np.array([[30.0, 0.0, 11.5], [0.0, 30.0, 7.5], [0.0, 0.0, 1.0]])


def _plane(origin, axis_u, axis_v, texture, shape=None) -> Layer:
    return Layer(np.asarray(origin, float), np.column_stack([axis_u, axis_v]).astype(float),
                 texture, np.array([[1.0, 0.0, 0.0], [0.0, 1.0, 0.0]]), shape)


class TestShape:
    @pytest.mark.parametrize(("norm", "inside", "outside"), [
        (1.0, [(0.9, 0.0), (0.45, 0.45)], [(0.6, 0.6), (1.1, 0.0)]),
        (2.0, [(0.7, 0.7), (0.0, -0.99)], [(0.75, 0.75), (0.0, 1.01)]),
        (math.inf, [(0.99, 0.99), (-0.99, 0.5)], [(1.01, 0.0), (0.5, -1.01)]),
    ])
    def test_norm_balls(self, norm, inside, outside) -> None:
        shape = Shape(radius=1.0, norm=norm)
        pts = np.array(inside + outside)
        expected = [True] * len(inside) + [False] * len(outside)
        assert shape.contains(pts[:, 0], pts[:, 1]).tolist() == expected

    def test_harmonic_boundary_and_extent(self) -> None:
        shape = Shape(radius=2.0, aspect=1.0, amplitudes=(0.3,), phases=(0.0,))
        # along theta = 0 the boundary is at 2 * (1 + 0.3), along theta = pi/2 at 2 * (1 - 0.3)
        assert shape.contains(np.array([2.5, 2.7]), np.zeros(2)).tolist() == [True, False]
        assert shape.contains(np.zeros(2), np.array([1.3, 1.5])).tolist() == [True, False]
        rng = np.random.default_rng(0)
        for norm in (1.0, 2.0, np.inf):
            for angle in (0.0, 0.4, 2.0):
                for amplitudes in ((), (0.2, 0.1)):
                    shape = Shape(radius=2.0, aspect=2.5, angle=angle, norm=norm,
                                  amplitudes=amplitudes, phases=(0.3, 1.0)[:len(amplitudes)])
                    u, v = rng.uniform(-12, 12, (2, 100000))
                    eu, ev = shape.half_extents()
                    inside = shape.contains(u, v)
                    assert not inside[(np.abs(u) > eu) | (np.abs(v) > ev)].any()
                    if not amplitudes:  # the box is tight: inside points come near each side
                        assert np.abs(u[inside]).max() > 0.9 * eu
                        assert np.abs(v[inside]).max() > 0.9 * ev


def test_sample_texture_matches_naive_mirrored_bilinear() -> None:
    rng = np.random.default_rng(1)
    texture = rng.uniform(0, 255, (4, 5, 3)).astype(np.float32)
    cols = rng.uniform(-12, 12, 50)
    rows = rng.uniform(-9, 9, 50)

    def mirror(c: float, n: int) -> float:
        c = c % (2 * (n - 1))
        return 2 * (n - 1) - c if c > n - 1 else c

    out = sample_texture(texture, cols, rows)
    for i in range(50):
        c, r = mirror(cols[i], 5), mirror(rows[i], 4)
        c0, r0 = min(int(c), 3), min(int(r), 2)
        fc, fr = c - c0, r - r0
        ref = ((1 - fr) * ((1 - fc) * texture[r0, c0] + fc * texture[r0, c0 + 1])
               + fr * ((1 - fc) * texture[r0 + 1, c0] + fc * texture[r0 + 1, c0 + 1]))
        np.testing.assert_allclose(out[i], ref, rtol=1e-4, atol=1e-2)


def test_inverse_depth_is_one_over_z_for_a_slanted_plane() -> None:
    camera = Camera(K, rigid_about([0.1, -0.2, 0.05], [0.3, 0.1, 0.5], [0, 0, 0]))
    layer = _plane([0.2, -0.1, 4.0], [1.0, 0.2, 0.3], [0.0, 1.0, -0.4],
                   np.zeros((8, 8, 3), np.float32))
    rng = np.random.default_rng(2)
    u, v = rng.uniform(-1, 1, (2, 20))
    world = layer.origin[:, None] + layer.axes @ np.stack([u, v])
    cam = camera.world_to_camera[:3, :3] @ world + camera.world_to_camera[:3, 3:]
    pix = K @ cam
    x, y = pix[0] / pix[2], pix[1] / pix[2]
    np.testing.assert_allclose(inverse_depth_at(layer, camera, x, y), 1.0 / cam[2], rtol=1e-10)


def test_zbuffer_orders_intersecting_planes_per_pixel() -> None:
    """Two planes crossing at x = 11.5: each is in front on one side, whatever the list order."""
    tex_a = np.full((4, 4, 3), 10.0, np.float32)
    tex_b = np.full((4, 4, 3), 200.0, np.float32)
    # a: z = 5 + 0.1 X ; b: z = 5 - 0.1 X (X = 0 at the principal point column)
    a = _plane([0, 0, 5.0], [1.0, 0, 0.1], [0, 1.0, 0], tex_a)
    b = _plane([0, 0, 5.0], [1.0, 0, -0.1], [0, 1.0, 0], tex_b)
    for layers, ids in (([a, b], (0, 1)), ([b, a], (1, 0))):
        view = render(layers, Camera(K, np.eye(4)), (16, 24))
        left, right = view.image[:, :11, 0], view.image[:, 12:, 0]
        np.testing.assert_allclose(left, 10.0, rtol=1e-5)
        np.testing.assert_allclose(right, 200.0, rtol=1e-5)
        assert (view.layer[:, :11] == ids[0]).all() and (view.layer[:, 12:] == ids[1]).all()


def test_rotation_is_orthonormal() -> None:
    r = rotation([0.3, -1.2, 0.7])
    np.testing.assert_allclose(r @ r.T, np.eye(3), atol=1e-12)
    assert np.linalg.det(r) == pytest.approx(1.0)
