from __future__ import annotations

import pytest
import torch

from crossview.geometry.cameras import random_se3
from crossview.models.multiview import MultiViewConfig
from crossview.models.multiview.depth import DEPTH_CONDITIONINGS, MultiViewDepth

F64 = torch.float64


def small_model(conditioning: str) -> MultiViewDepth:
    torch.manual_seed(0)
    config = MultiViewConfig(conditioning=conditioning, image_size=(16, 24), patch=4, width=16,
                             depth=2, heads=2)
    return MultiViewDepth(config).double().eval()


def inputs(seed: int, views: int = 3) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    gen = torch.Generator().manual_seed(seed)
    images = 255 * torch.rand(1, views, 3, 16, 24, generator=gen, dtype=F64)
    K = torch.zeros(1, views, 3, 3, dtype=F64)
    K[..., 0, 0] = 20 + 20 * torch.rand(1, views, generator=gen, dtype=F64)
    K[..., 1, 1] = K[..., 0, 0]
    K[..., 0, 2], K[..., 1, 2], K[..., 2, 2] = 12.0, 8.0, 1.0
    return images, K, random_se3(1, views, generator=gen, dtype=F64)


@pytest.mark.parametrize("conditioning", DEPTH_CONDITIONINGS)
def test_shapes_and_positive_depth(conditioning: str) -> None:
    with torch.no_grad():
        out = small_model(conditioning)(*inputs(0))
    assert out.shape == (1, 3, 16, 24)
    assert bool(torch.isfinite(out).all()) and float(out.min()) > 0


@pytest.mark.parametrize("conditioning", DEPTH_CONDITIONINGS)
def test_similarity_of_the_world_scales_the_depth(conditioning: str) -> None:
    """Moving the world rigidly leaves depth unchanged; scaling it by s scales depth by s."""
    images, K, poses = inputs(1)
    world = torch.linalg.inv(random_se3(1, 1, generator=torch.Generator().manual_seed(2),
                                        dtype=F64, translation_scale=3.0))
    scaled = poses.clone()
    scaled[..., :3, 3] *= 2.5
    model = small_model(conditioning)
    with torch.no_grad():
        out = model(images, K, poses)
        moved = model(images, K, poses @ world)
        bigger = model(images, K, scaled)
    torch.testing.assert_close(moved, out, atol=1e-8, rtol=1e-8)
    torch.testing.assert_close(bigger, 2.5 * out, atol=1e-8, rtol=1e-8)


@pytest.mark.parametrize("conditioning", DEPTH_CONDITIONINGS)
def test_only_a_camera_conditioning_sees_the_relative_rotation(conditioning: str) -> None:
    """Turning view 1 about its own centre (same baseline) changes the depth of view 0 for
    every conditioning but ``none``, which only sees the images and the scale."""
    images, K, poses = inputs(3, views=2)
    turned = poses.clone()
    turn = random_se3(1, 1, generator=torch.Generator().manual_seed(4), dtype=F64,
                      translation_scale=0.0)[0, 0]
    turned[0, 1] = turn @ poses[0, 1]
    model = small_model(conditioning)
    with torch.no_grad():
        change = (model(images, K, turned) - model(images, K, poses)).abs().max()
    if conditioning == "none":
        assert float(change) < 1e-10
    else:
        assert float(change) > 1e-6


def test_bad_inputs_name_the_tensor() -> None:
    model = small_model("prope")
    images, K, poses = inputs(5)
    with pytest.raises(ValueError, match=r"images must be \[B, V, 3, 16, 24\]"):
        model(images[..., :8], K, poses)
    with pytest.raises(ValueError, match="conditioning must be one of"):
        MultiViewDepth(MultiViewConfig(conditioning="rope", image_size=(16, 24), patch=4))
    with pytest.raises(ValueError, match="must divide by patch"):
        MultiViewDepth(MultiViewConfig(image_size=(18, 24), patch=4))
