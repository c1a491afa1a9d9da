from __future__ import annotations

import math

import pytest
import torch

from crossview.geometry.cameras import (
    Cameras,
    camera_centers,
    invert_intrinsics,
    invert_se3,
    normalize_intrinsics,
    normalize_poses,
    random_se3,
)

F64 = torch.float64



def random_intrinsics(generator: torch.Generator, *shape: int, height: int = 24,
                      width: int = 40) -> torch.Tensor:
    K = torch.zeros(*shape, 3, 3, dtype=F64)
    K[..., 0, 0] = width * (0.5 + torch.rand(shape, generator=generator, dtype=F64))
    K[..., 1, 1] = height * (0.5 + torch.rand(shape, generator=generator, dtype=F64))
    K[..., 0, 1] = 0.1 * torch.randn(shape, generator=generator, dtype=F64)
    K[..., 0, 2] = width * torch.rand(shape, generator=generator, dtype=F64)
    K[..., 1, 2] = height * torch.rand(shape, generator=generator, dtype=F64)
    K[..., 2, 2] = 1.0
    return K


class TestNormalizeIntrinsics:
    def test_width_divides_x_and_height_divides_y(self) -> None:
        K = torch.tensor([[100.0, 0.0, 30.0], [0.0, 80.0, 20.0], [0.0, 0.0, 1.0]], dtype=F64)
        norm = normalize_intrinsics(K, (40, 60))  # (height, width)
        expected = torch.tensor(
            [[100 / 60, 0.0, 30 / 60 - 0.5], [0.0, 80 / 40, 20 / 40 - 0.5], [0.0, 0.0, 1.0]],
            dtype=F64,
        )
        torch.testing.assert_close(norm, expected)

    def test_maps_pixels_to_centred_unit_coordinates(self) -> None:
        gen = torch.Generator().manual_seed(0)
        K = random_intrinsics(gen, 5)
        point = torch.randn(5, 3, generator=gen, dtype=F64)
        point[:, 2] += 4.0
        pixel = (K @ point[..., None])[..., 0]
        unit = (normalize_intrinsics(K, (24, 40)) @ point[..., None])[..., 0]
        u, v = pixel[:, 0] / pixel[:, 2], pixel[:, 1] / pixel[:, 2]
        torch.testing.assert_close(unit[:, 0] / unit[:, 2], u / 40 - 0.5)
        torch.testing.assert_close(unit[:, 1] / unit[:, 2], v / 24 - 0.5)

    def test_bad_shape_names_the_tensor(self) -> None:
        with pytest.raises(ValueError, match=r"K.shape=\(3, 4\)"):
            normalize_intrinsics(torch.zeros(3, 4), (4, 4))
        with pytest.raises(ValueError, match="height, width"):
            normalize_intrinsics(torch.eye(3), (0, 4))


class TestInverses:
    def test_intrinsics_inverse_is_exact(self) -> None:
        K = random_intrinsics(torch.Generator().manual_seed(1), 7)
        torch.testing.assert_close(invert_intrinsics(K), torch.linalg.inv(K), atol=1e-12,
                                   rtol=1e-12)

    def test_se3_inverse_is_exact(self) -> None:
        T = random_se3(3, 2, generator=torch.Generator().manual_seed(2), dtype=F64)
        torch.testing.assert_close(invert_se3(T), torch.linalg.inv(T), atol=1e-12, rtol=1e-12)

    def test_projection_inverse_is_analytic_inverse(self) -> None:
        gen = torch.Generator().manual_seed(3)
        K, T = random_intrinsics(gen, 4), random_se3(4, generator=gen, dtype=F64)
        cams = Cameras(K, T, (24, 40))
        eye = torch.eye(4, dtype=F64).expand(4, 4, 4)
        torch.testing.assert_close(cams.projection() @ cams.projection_inverse(), eye,
                                   atol=1e-12, rtol=0)
        torch.testing.assert_close(cams.projection_inverse(), torch.linalg.inv(cams.projection()),
                                   atol=1e-10, rtol=1e-10)

    def test_projection_projects_points(self) -> None:
        gen = torch.Generator().manual_seed(4)
        cams = Cameras(random_intrinsics(gen), random_se3(generator=gen, dtype=F64), (24, 40))
        point_cam = torch.tensor([0.3, -0.2, 2.0], dtype=F64)
        point_world = invert_se3(cams.viewmats) @ torch.cat([point_cam, torch.ones(1, dtype=F64)])
        image = cams.projection() @ point_world
        pixel = cams.K @ point_cam
        torch.testing.assert_close(image[0] / image[2], pixel[0] / pixel[2] / 40 - 0.5)
        torch.testing.assert_close(image[1] / image[2], pixel[1] / pixel[2] / 24 - 0.5)
        torch.testing.assert_close(image[3], torch.tensor(1.0, dtype=F64))


class TestCameras:
    def test_mismatched_shapes_raise(self) -> None:
        with pytest.raises(ValueError, match="leading shape"):
            Cameras(torch.eye(3).expand(2, 3, 3), torch.eye(4).expand(3, 4, 4), (8, 8))

    def test_integer_tensor_is_a_type_error(self) -> None:
        with pytest.raises(TypeError, match="dtype"):
            Cameras(torch.eye(3, dtype=torch.int64), torch.eye(4), (8, 8))

    def test_centers(self) -> None:
        T = random_se3(3, generator=torch.Generator().manual_seed(5), dtype=F64)
        centers = camera_centers(T)
        homogeneous = torch.cat([centers, torch.ones(3, 1, dtype=F64)], dim=-1)
        in_camera = (T @ homogeneous[..., None])[..., :3, 0]
        torch.testing.assert_close(in_camera, torch.zeros(3, 3, dtype=F64), atol=1e-12, rtol=0)


class TestNormalizePoses:
    def test_reference_is_identity_and_baseline_is_one(self) -> None:
        T = random_se3(2, 3, generator=torch.Generator().manual_seed(6), dtype=F64)
        normalized, scale = normalize_poses(T, reference=1)
        torch.testing.assert_close(normalized[:, 1], torch.eye(4, dtype=F64).expand(2, 4, 4))
        distances = camera_centers(normalized).norm(dim=-1)
        torch.testing.assert_close(distances.amax(dim=-1), torch.ones(2, dtype=F64))
        original = (camera_centers(T) - camera_centers(T)[:, 1:2]).norm(dim=-1).amax(dim=-1)
        torch.testing.assert_close(scale, 1.0 / original)

    def test_negative_reference_counts_from_the_end(self) -> None:
        T = random_se3(2, 3, generator=torch.Generator().manual_seed(8), dtype=F64)
        for negative, positive in ((-1, 2), (-3, 0)):
            normalized, scale = normalize_poses(T, reference=negative)
            expected, expected_scale = normalize_poses(T, reference=positive)
            torch.testing.assert_close(normalized, expected, rtol=0, atol=0)
            torch.testing.assert_close(scale, expected_scale, rtol=0, atol=0)
        with pytest.raises(ValueError, match="reference=-4"):
            normalize_poses(T, reference=-4)

    def test_relative_poses_are_preserved_up_to_scale(self) -> None:
        T = random_se3(3, generator=torch.Generator().manual_seed(7), dtype=F64)
        normalized, scale = normalize_poses(T)
        relative = T[1] @ invert_se3(T[2])
        relative_new = normalized[1] @ invert_se3(normalized[2])
        torch.testing.assert_close(relative_new[:3, :3], relative[:3, :3])
        torch.testing.assert_close(relative_new[:3, 3], relative[:3, 3] * scale)

    def test_single_camera_scale_is_one(self) -> None:
        _, scale = normalize_poses(torch.eye(4)[None].clone())
        assert math.isclose(float(scale), 1.0)
