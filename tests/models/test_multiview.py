from __future__ import annotations

import pytest
import torch

from crossview.geometry.cameras import random_se3
from crossview.models.multiview import CONDITIONINGS, MultiViewConfig, MultiViewTransformer
from crossview.models.multiview.model import patchify, unpatchify

F64 = torch.float64


def small_model(conditioning: str) -> MultiViewTransformer:
    torch.manual_seed(0)
    config = MultiViewConfig(conditioning=conditioning, image_size=(16, 24), patch=4, width=16,
                             depth=2, heads=2)
    return MultiViewTransformer(config).double().eval()


def inputs(seed: int, context: int = 2, targets: int = 2):
    gen = torch.Generator().manual_seed(seed)
    views = context + targets
    images = 255 * torch.rand(1, context, 3, 16, 24, generator=gen, dtype=F64)
    K = torch.zeros(1, views, 3, 3, dtype=F64)
    K[..., 0, 0] = 20 + 20 * torch.rand(1, views, generator=gen, dtype=F64)
    K[..., 1, 1] = K[..., 0, 0]
    K[..., 0, 2], K[..., 1, 2], K[..., 2, 2] = 12.0, 8.0, 1.0
    poses = random_se3(1, views, generator=gen, dtype=F64)
    return images, K[:, :context], poses[:, :context], K[:, context:], poses[:, context:]


@pytest.mark.parametrize("conditioning", CONDITIONINGS)
def test_shapes_and_range(conditioning: str) -> None:
    with torch.no_grad():
        out = small_model(conditioning)(*inputs(0))
    assert out.shape == (1, 2, 3, 16, 24)
    assert float(out.min()) >= 0.0 and float(out.max()) <= 255.0


@pytest.mark.parametrize("conditioning", CONDITIONINGS)
def test_invariant_to_the_world_frame(conditioning: str) -> None:
    images, Kc, poses_c, Kt, poses_t = inputs(1)
    world = torch.linalg.inv(random_se3(1, 1, generator=torch.Generator().manual_seed(2),
                                        dtype=F64, translation_scale=3.0))
    model = small_model(conditioning)
    with torch.no_grad():
        out = model(images, Kc, poses_c, Kt, poses_t)
        moved = model(images, Kc, poses_c @ world, Kt, poses_t @ world)
    torch.testing.assert_close(moved, out, atol=1e-8, rtol=0)


@pytest.mark.parametrize("conditioning", ["plucker", "prope"])
def test_targets_do_not_see_each_other(conditioning: str) -> None:
    images, Kc, poses_c, Kt, poses_t = inputs(3)
    model = small_model(conditioning)
    with torch.no_grad():
        joint = model(images, Kc, poses_c, Kt, poses_t)
        alone = model(images, Kc, poses_c, Kt[:, 1:], poses_t[:, 1:])
    torch.testing.assert_close(joint[:, 1:], alone, atol=1e-10, rtol=0)


def test_intrinsics_reach_prope_but_not_gta() -> None:
    images, Kc, poses_c, Kt, poses_t = inputs(4)
    zoomed = Kt.clone()
    zoomed[..., 0, 0] *= 2
    zoomed[..., 1, 1] *= 2
    with torch.no_grad():
        prope, gta = small_model("prope"), small_model("gta")
        assert not torch.allclose(prope(images, Kc, poses_c, zoomed, poses_t),
                                  prope(images, Kc, poses_c, Kt, poses_t))
        torch.testing.assert_close(gta(images, Kc, poses_c, zoomed, poses_t),
                                   gta(images, Kc, poses_c, Kt, poses_t), atol=0, rtol=0)


def test_relative_encodings_have_equal_parameter_counts() -> None:
    counts = {c: sum(p.numel() for p in small_model(c).parameters()) for c in CONDITIONINGS}
    assert counts["cape"] == counts["gta"] == counts["prope"]
    assert counts["plucker"] == counts["naive"] > counts["prope+camray"] > counts["prope"]


def test_more_context_views_than_in_training() -> None:
    with torch.no_grad():
        out = small_model("prope")(*inputs(5, context=4, targets=1))
    assert out.shape == (1, 1, 3, 16, 24)


def test_patchify_round_trip() -> None:
    maps = torch.randn(2, 3, 8, 12, 5)
    tokens = patchify(maps, 4)
    assert tokens.shape == (2, 3 * 2 * 3, 4 * 4 * 5)
    torch.testing.assert_close(tokens[0, 4], maps[0, 0, 4:8, 4:8].reshape(-1))
    torch.testing.assert_close(unpatchify(tokens, 3, (8, 12), 4), maps)


def test_bad_configuration() -> None:
    with pytest.raises(ValueError, match="conditioning"):
        MultiViewTransformer(MultiViewConfig(conditioning="raymap"))
    with pytest.raises(ValueError, match="divide by patch"):
        MultiViewTransformer(MultiViewConfig(image_size=(30, 32)))
    model = small_model("prope")
    images, *cams = inputs(6)
    with pytest.raises(ValueError, match="context_images"):
        model(images[..., :8], *cams)
