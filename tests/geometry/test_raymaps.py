from __future__ import annotations

import pytest
import torch

from crossview.geometry.cameras import Cameras, invert_se3, random_se3
from crossview.geometry.raymaps import (
    camray_map,
    naive_raymap,
    pixel_centers,
    plucker_from_rays,
    plucker_raymap,
    world_rays,
)

F64 = torch.float64
SIZE = (12, 16)  # (height, width)


def make_cameras(seed: int, views: int = 3) -> Cameras:
    gen = torch.Generator().manual_seed(seed)
    K = torch.zeros(views, 3, 3, dtype=F64)
    K[:, 0, 0] = 20.0 + 10 * torch.rand(views, generator=gen, dtype=F64)
    K[:, 1, 1] = 18.0 + 10 * torch.rand(views, generator=gen, dtype=F64)
    K[:, 0, 2], K[:, 1, 2], K[:, 2, 2] = 8.3, 5.9, 1.0
    return Cameras(K, random_se3(views, generator=gen, dtype=F64), SIZE)


class TestPixelCenters:
    def test_pixels_sit_at_half_integers(self) -> None:
        grid = pixel_centers(2, 3, dtype=F64)
        assert grid.shape == (2, 3, 2)
        torch.testing.assert_close(grid[0, 0], torch.tensor([0.5, 0.5], dtype=F64))
        torch.testing.assert_close(grid[1, 2], torch.tensor([2.5, 1.5], dtype=F64))

    def test_patches_sit_at_patch_centres(self) -> None:
        grid = pixel_centers(8, 12, stride=4, dtype=F64)
        assert grid.shape == (2, 3, 2)
        torch.testing.assert_close(grid[1, 2], torch.tensor([10.0, 6.0], dtype=F64))

    def test_stride_must_divide(self) -> None:
        with pytest.raises(ValueError, match="stride=5"):
            pixel_centers(8, 12, stride=5)


class TestPlucker:
    def test_moment_invariant_to_moving_origin_along_ray(self) -> None:
        gen = torch.Generator().manual_seed(0)
        origins = torch.randn(50, 3, generator=gen, dtype=F64)
        directions = torch.nn.functional.normalize(torch.randn(50, 3, generator=gen, dtype=F64),
                                                   dim=-1)
        steps = 10 * torch.randn(50, 1, generator=gen, dtype=F64)
        torch.testing.assert_close(plucker_from_rays(origins + steps * directions, directions),
                                   plucker_from_rays(origins, directions), atol=1e-12, rtol=0)

    def test_order_direction_then_moment(self) -> None:
        rays = plucker_raymap(make_cameras(1))
        assert rays.shape == (3, *SIZE, 6)
        direction, moment = rays[..., :3], rays[..., 3:]
        torch.testing.assert_close(direction.norm(dim=-1), torch.ones(3, *SIZE, dtype=F64))
        torch.testing.assert_close((direction * moment).sum(-1), torch.zeros(3, *SIZE, dtype=F64),
                                   atol=1e-12, rtol=0)
        origins, directions = world_rays(make_cameras(1))
        torch.testing.assert_close(moment, torch.linalg.cross(origins, directions, dim=-1))

    def test_rays_project_back_onto_their_pixel_centres(self) -> None:
        cams = make_cameras(2)
        origins, directions = world_rays(cams)
        points = origins + 3.0 * directions
        homogeneous = torch.cat([points, torch.ones_like(points[..., :1])], dim=-1)
        in_camera = (cams.viewmats[:, None, None] @ homogeneous[..., None])[..., :3, 0]
        pixels = (cams.K[:, None, None] @ in_camera[..., None])[..., 0]
        uv = pixels[..., :2] / pixels[..., 2:]
        expected = pixel_centers(*SIZE, dtype=F64).expand_as(uv)
        torch.testing.assert_close(uv, expected, atol=1e-10, rtol=0)
        assert bool((in_camera[..., 2] > 0).all())


class TestNaive:
    def test_origin_then_direction(self) -> None:
        cams = make_cameras(3)
        rays = naive_raymap(cams)
        centers = invert_se3(cams.viewmats)[:, :3, 3]
        torch.testing.assert_close(rays[..., :3], centers[:, None, None].expand(3, *SIZE, 3))
        torch.testing.assert_close(rays[..., 3:], plucker_raymap(cams)[..., :3])


class TestCamRay:
    def test_invariant_to_extrinsics(self) -> None:
        cams = make_cameras(4)
        moved = Cameras(cams.K, random_se3(3, generator=torch.Generator().manual_seed(9),
                                           dtype=F64), SIZE)
        torch.testing.assert_close(camray_map(moved), camray_map(cams), atol=0, rtol=0)
        assert not torch.allclose(plucker_raymap(moved), plucker_raymap(cams))

    def test_unit_depth_directions_through_pixel_centres(self) -> None:
        cams = make_cameras(5)
        rays = camray_map(cams)
        torch.testing.assert_close(rays[..., 2], torch.ones(3, *SIZE, dtype=F64))
        pixels = (cams.K[:, None, None] @ rays[..., None])[..., :2, 0]
        torch.testing.assert_close(pixels, pixel_centers(*SIZE, dtype=F64).expand_as(pixels))

    def test_patch_rays_equal_pixel_rays_of_a_downscaled_camera(self) -> None:
        cams = make_cameras(6)
        scale = torch.diag(torch.tensor([0.25, 0.25, 1.0], dtype=F64))
        small = Cameras(scale @ cams.K, cams.viewmats, (SIZE[0] // 4, SIZE[1] // 4))
        torch.testing.assert_close(camray_map(cams, stride=4), camray_map(small))
        torch.testing.assert_close(plucker_raymap(cams, stride=4), plucker_raymap(small))
