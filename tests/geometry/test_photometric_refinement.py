"""Photometric refinement: exact shifts are recovered from a sub-pixel start, the true field is
a fixed point, pixels without data keep the network's field, stereo moves along x only, and
the inference paths switch it by the model's default or on request."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

from crossview import api
from crossview.geometry.photometric_refinement import RefinementSettings, _window_sums, refine_field
from crossview.models.dense.inference import predict_fields
from crossview.models.matchstereo import MatchStereo
from crossview.models.registry import get_spec
from small_networks import SMALL

INTERIOR = (slice(None), slice(10, -10), slice(10, -10))


def _texture(h: int = 100, w: int = 140, seed: int = 0) -> torch.Tensor:
    """``[1, 3, h, w]`` smooth random grey texture, values 0..255."""
    g = torch.Generator().manual_seed(seed)
    coarse = torch.rand(1, 1, h // 4, w // 4, generator=g)
    return (F.interpolate(coarse, size=(h, w), mode="bicubic", align_corners=True)
            * 255).expand(1, 3, h, w)


def _shifted_pair() -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Two crops of one texture whose true field is exactly ``(+1, -2)`` px everywhere:
    image0(p) = texture(p + (2, 2)) = image1(p + (1, -2)) with image1 = texture[4:, 1:-3]."""
    texture = _texture()
    image0, image1 = texture[..., 2:-2, 2:-2], texture[..., 4:, 1:-3]
    truth = torch.tensor([1.0, -2.0]).expand(1, *image0.shape[-2:], 2)
    return image0, image1, truth


def test_a_subpixel_start_moves_to_the_exact_shift() -> None:
    image0, image1, truth = _shifted_pair()
    start = truth + torch.tensor([-0.6, 0.45])
    refined = refine_field(image0, image1, start)
    before = (start - truth)[INTERIOR].norm(dim=-1).mean()
    after = (refined - truth)[INTERIOR].norm(dim=-1).mean()
    assert before > 0.7 and after < 0.05


def test_the_true_field_is_a_fixed_point() -> None:
    image0, image1, truth = _shifted_pair()
    refined = refine_field(image0, image1, truth.clone())
    # float32 sampling noise only: 200 times below the half-pixel start of the test above
    torch.testing.assert_close(refined[INTERIOR], truth[INTERIOR], atol=3e-3, rtol=0)


def test_stereo_moves_along_x_only() -> None:
    texture = _texture()
    left, right = texture[..., :, 3:], texture[..., :, :-3]  # left(x) = right(x + 3)
    truth = torch.tensor([3.0, 0.0]).expand(1, *left.shape[-2:], 2)
    refined = refine_field(left, right, truth + torch.tensor([0.5, 0.0]), horizontal=True)
    assert (refined[..., 0] - 3)[INTERIOR].abs().mean() < 0.05
    assert torch.equal(refined[..., 1], torch.zeros_like(refined[..., 1]))
    tilted = truth + torch.tensor([0.5, 0.25])  # a y the search must leave alone
    assert torch.equal(refine_field(left, right, tilted, horizontal=True)[..., 1], tilted[..., 1])


def test_pixels_without_data_keep_the_given_field() -> None:
    flat = torch.full((1, 3, 40, 60), 128.0)  # no texture: every gradient is zero
    field = torch.randn(1, 40, 60, 2)
    assert torch.equal(refine_field(flat, flat, field), field)
    image0, image1, _ = _shifted_pair()
    outside = torch.full((1, *image0.shape[-2:], 2), 1000.0)  # every match leaves image1
    assert torch.equal(refine_field(image0, image1, outside), outside)


@pytest.mark.parametrize("radius", [1, 2, 3, 4, 6, 7])
def test_window_sums_are_box_means_with_replicated_borders(radius: int) -> None:
    terms = torch.rand(2, 3, 17, 23, dtype=torch.float64)
    padded = F.pad(terms, (radius,) * 4, mode="replicate")
    expected = F.avg_pool2d(padded, 2 * radius + 1, stride=1)
    torch.testing.assert_close(_window_sums(terms, radius), expected, rtol=0, atol=1e-12)


def test_bad_arguments_are_refused() -> None:
    image = torch.zeros(1, 3, 20, 30)
    with pytest.raises(ValueError, match="one shape"):
        refine_field(image, torch.zeros(1, 3, 20, 31), torch.zeros(1, 20, 30, 2))
    with pytest.raises(ValueError, match=r"field must be \[B, H, W, 2\]"):
        refine_field(image, image, torch.zeros(1, 20, 30, 1))
    with pytest.raises(ValueError, match="damping must be > 0"):
        RefinementSettings(damping=0.0)
    with pytest.raises(ValueError, match="radius and steps"):
        RefinementSettings(steps=0)


def _tiny_network(task: str) -> MatchStereo:
    """A small random MatchStereo (no weights, so no registry defaults) in eval mode."""
    return MatchStereo(SMALL,
                       task=task).eval()


def test_inference_follows_the_models_default_unless_told() -> None:
    torch.manual_seed(0)
    model = _tiny_network("flow")
    image0 = _texture(192, 192)
    image1 = image0.roll(2, dims=3)
    raw = predict_fields(model, image0, image1, "flow").field  # a bare network: off
    model.refine_by_default = True
    default = predict_fields(model, image0, image1, "flow").field
    off = predict_fields(model, image0, image1, "flow", refine=False).field
    on = predict_fields(model, image0, image1, "flow", refine=True).field
    assert torch.equal(off, raw) and torch.equal(on, default) and not torch.equal(on, raw)
    both = torch.cat([image0, image1]), torch.cat([image1, image0])
    torch.testing.assert_close(on, refine_field(*both, raw))


def test_registry_defaults() -> None:
    assert get_spec("matchstereo-hybrid").refine and get_spec("matchflow-hybrid").refine
    assert not any(get_spec(n).refine for n in ("matchstereo-t", "matchstereo-b", "matchflow-b"))
    assert api.build_model("matchstereo-hybrid").refine_by_default
    assert not api.build_model("matchstereo-t").refine_by_default


def test_low_resolution_initialisation_follows_the_models_default_unless_told() -> None:
    torch.manual_seed(0)
    model = _tiny_network("stereo")
    image0 = _texture(384, 384)  # the half-resolution pass needs 192 x 192
    image1 = image0.roll(-3, dims=3)
    plain = predict_fields(model, image0, image1, "stereo").field  # a bare network: off
    model.lri_by_default = True
    default = predict_fields(model, image0, image1, "stereo").field
    off = predict_fields(model, image0, image1, "stereo", lri=False).field
    on = predict_fields(model, image0, image1, "stereo", lri=True).field
    assert torch.equal(off, plain) and torch.equal(on, default) and not torch.equal(on, plain)
    # a pair whose half is below the least size (192 x 192 here) starts without the half pass
    small0, small1 = image0[..., :256, :256], image1[..., :256, :256]
    torch.testing.assert_close(predict_fields(model, small0, small1, "stereo").field,
                               predict_fields(model, small0, small1, "stereo", lri=False).field,
                               rtol=0, atol=0)
    assert api.build_model("matchstereo-hybrid").lri_by_default == get_spec(
        "matchstereo-hybrid").lri
    # both bundled defaults start from the half-resolution pass (chosen on held-out scenes)
    assert get_spec("matchflow-hybrid").lri and api.build_model("matchflow-hybrid").lri_by_default
    assert not any(get_spec(n).lri for n in ("matchstereo-t", "matchstereo-b", "matchflow-b"))
