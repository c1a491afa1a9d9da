from __future__ import annotations

import numpy as np
import torch
import torch.nn.functional as F

from crossview.data.synthetic.depth_scenes import (
    BASE_FOCAL,
    DISTANCE,
    OBJECT_Z,
    OBJECTS,
    depth_layers,
    make_depth_scenes,
)


def _centres(viewmats: torch.Tensor) -> torch.Tensor:
    """Camera centres ``[..., 3]`` of world-to-camera ``[..., 4, 4]``: ``-R^T t``."""
    R, t = viewmats[..., :3, :3].double(), viewmats[..., :3, 3:].double()
    return -(R.transpose(-1, -2) @ t)[..., 0]


def _angles(viewmats: torch.Tensor) -> torch.Tensor:
    """Degrees between view 0's and every other view's direction from the origin ``[N, V-1]``."""
    c = _centres(viewmats)
    d = c / c.norm(dim=-1, keepdim=True)
    cos = (d[:, :1] * d[:, 1:]).sum(-1).clamp(-1, 1)
    return torch.rad2deg(torch.acos(cos))


def test_cameras_follow_the_ranges() -> None:
    data = make_depth_scenes(4, 3, (1.0, 1.5), (5.0, 20.0), seed=0, size=(16, 16),
                             variants={"zoomed": ((2.0, 3.0), (5.0, 20.0)),
                                       "wide": ((1.0, 1.5), (25.0, 35.0))})
    assert set(data) == {"main", "zoomed", "wide"}
    for name, zoom, separation in (("main", (1.0, 1.5), (5.0, 20.0)),
                                   ("zoomed", (2.0, 3.0), (5.0, 20.0)),
                                   ("wide", (1.0, 1.5), (25.0, 35.0))):
        scenes = data[name]
        assert scenes["images"].shape == (4, 3, 3, 16, 16)
        assert scenes["depth"].shape == scenes["valid"].shape == (4, 3, 16, 16)
        assert scenes["valid"].dtype == torch.bool
        factor = scenes["K"][..., 0, 0] / (BASE_FOCAL * 16)
        assert float(factor.min()) >= zoom[0] - 1e-5 and float(factor.max()) <= zoom[1] + 1e-5
        angles = _angles(scenes["viewmats"])
        assert float(angles.min()) >= separation[0] - 1e-4
        assert float(angles.max()) <= separation[1] + 1e-4
        distance = _centres(scenes["viewmats"]).norm(dim=-1)
        assert float(distance.min()) >= DISTANCE[0] - 1e-5
        assert float(distance.max()) <= DISTANCE[1] + 1e-5
        depth = scenes["depth"][scenes["valid"]]
        assert float(depth.min()) > 0 and bool((scenes["depth"][~scenes["valid"]] == 0).all())


def _warp_error(scenes: dict[str, torch.Tensor], i: int, depth: torch.Tensor) -> float:
    """Mean |view 0 - view 1 sampled where ``depth`` of view 0 projects|, over pixels that
    land inside view 1 (an independent pinhole reprojection, pixel centres at +0.5)."""
    K0, K1 = scenes["K"][i, 0].double(), scenes["K"][i, 1].double()
    V0, V1 = scenes["viewmats"][i, 0].double(), scenes["viewmats"][i, 1].double()
    h, w = depth.shape
    ys, xs = torch.meshgrid(torch.arange(h) + 0.5, torch.arange(w) + 0.5, indexing="ij")
    pixels = torch.stack([xs, ys, torch.ones_like(xs)], -1).double()
    points = pixels @ torch.linalg.inv(K0).T * depth.double()[..., None]
    world = torch.cat([points, torch.ones(h, w, 1, dtype=torch.float64)], -1) @ torch.linalg.inv(
        V0).T
    projected = (world @ V1.T)[..., :3] @ K1.T
    uv = projected[..., :2] / projected[..., 2:]
    grid = torch.stack([uv[..., 0] / w * 2 - 1, uv[..., 1] / h * 2 - 1], -1)[None].float()
    warped = F.grid_sample(scenes["images"][i, 1][None], grid, align_corners=False)[0]
    inside = (grid.abs() < 1).all(-1)[0] & scenes["valid"][i, 0]
    return float((warped - scenes["images"][i, 0]).abs().mean(0)[inside].mean())


def test_depth_agrees_with_the_cameras() -> None:
    """Warping view 1 into view 0 through the true depth matches view 0 better than through a
    depth 30 % too far or a constant depth, scene after scene."""
    scenes = make_depth_scenes(6, 2, (1.0, 1.5), (10.0, 20.0), seed=3, size=(32, 32))["main"]
    for i in range(6):
        depth = scenes["depth"][i, 0]
        true = _warp_error(scenes, i, depth)
        assert true < _warp_error(scenes, i, 1.3 * depth)
        assert true < _warp_error(scenes, i, torch.full_like(depth, float(depth.median())))


def test_same_seed_same_scenes() -> None:
    first = make_depth_scenes(2, 2, (1.0, 1.5), (5.0, 20.0), seed=7, size=(16, 16))
    again = make_depth_scenes(2, 2, (1.0, 1.5), (5.0, 20.0), seed=7, size=(16, 16))
    for key, value in first["main"].items():
        assert torch.equal(value, again["main"][key]), key


def test_objects_spread_in_depth_between_cameras_and_background() -> None:
    rng = np.random.default_rng(0)
    zs = []
    for _ in range(20):
        background, *objects = depth_layers(rng, (32, 32), "train")
        assert background.shape is None and 1.2 <= background.origin[2] <= 2.0
        assert OBJECTS[0] <= len(objects) <= OBJECTS[1]
        zs += [layer.origin[2] for layer in objects]
    assert OBJECT_Z[0] <= min(zs) and max(zs) <= OBJECT_Z[1]
    assert min(zs) < OBJECT_Z[0] + 0.5 and max(zs) > OBJECT_Z[1] - 0.5  # the whole range

