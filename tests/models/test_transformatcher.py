from __future__ import annotations

import itertools
import math

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from hypothesis import given, settings
from hypothesis import strategies as st

from crossview.attention.rope4d import match_positions, rope4d_angles, rope4d_rotation
from crossview.models.keypoints.coordinates import (
    grid_centres,
    normalised_to_pixels,
    pixels_to_normalised,
)
from crossview.models.transformatcher import backbone as backbone_module
from crossview.models.transformatcher.backbone import EfficientNetLite0, ResNet101
from crossview.models.transformatcher.correlation import (
    multilayer_correlation,
    resample_layers,
    upsample_correlation,
)
from crossview.models.transformatcher.layers import MatchToMatchAttention
from crossview.models.transformatcher.loss import keypoint_loss
from crossview.models.transformatcher.model import (
    MatchRefiner,
    TransforMatcher,
    raw_argmax_coords,
)
from crossview.models.transformatcher.softargmax import hard_argmax, kernel_soft_argmax, soft_sample


def test_correlation_is_relu_cosine_per_layer() -> None:
    gen = torch.Generator().manual_seed(0)
    src = [torch.randn(2, 5, 3, 4, generator=gen), torch.randn(2, 7, 3, 4, generator=gen)]
    tgt = [torch.randn(2, 5, 3, 4, generator=gen), torch.randn(2, 7, 3, 4, generator=gen)]
    corr = multilayer_correlation(src, tgt, (3, 4))
    assert corr.shape == (2, 2, 3, 4, 3, 4)
    for b, layer, i, j, k, m in [(0, 0, 1, 2, 0, 3), (1, 1, 2, 0, 2, 1), (1, 0, 0, 0, 1, 1)]:
        cos = F.cosine_similarity(src[layer][b, :, i, j], tgt[layer][b, :, k, m], dim=0)
        torch.testing.assert_close(corr[b, layer, i, j, k, m], cos.clamp(min=0))


def _positional_resample(x: np.ndarray, n_out: int, ratio: float) -> np.ndarray:
    """Naive reference: grid cell j of a 1D map x [n_in] whose cells sit at ratio * k."""
    out = np.zeros(n_out)
    for j in range(n_out):
        k = min(j / ratio, len(x) - 1)
        lo = math.floor(k)
        hi = min(lo + 1, len(x) - 1)
        out[j] = (1 - (k - lo)) * x[lo] + (k - lo) * x[hi]
    return out


@pytest.mark.parametrize(("n_in", "n_out", "ratio"), [(8, 15, 2.0), (3, 6, 2.0), (8, 4, 0.5)])
def test_correlation_resamples_features_by_cell_position(n_in: int, n_out: int,
                                                         ratio: float) -> None:
    # A stride-32 map of a 240 px image has 8 cells at pixels 0, 32, ..., 224; the 15 x 15
    # stride-16 grid has cells at 0, 16, ..., 224, so grid cell j samples the map at j / 2.
    gen = torch.Generator().manual_seed(0)
    feats = [torch.rand(1, 3, n_in, n_in, generator=gen, dtype=torch.float64)]
    corr = multilayer_correlation(feats, feats, (n_out, n_out))
    f = feats[0][0].numpy()
    rows = np.stack([[_positional_resample(f[c, i], n_out, ratio) for i in range(n_in)]
                     for c in range(3)])  # [C, n_in, n_out]: x resampled
    both = np.stack([[_positional_resample(rows[c, :, j], n_out, ratio) for j in range(n_out)]
                     for c in range(3)]).transpose(0, 2, 1)  # [C, n_out (y), n_out (x)]
    resized = [torch.from_numpy(np.ascontiguousarray(both))[None]]
    torch.testing.assert_close(corr, multilayer_correlation(resized, resized, (n_out, n_out)))


def test_backbones_centre_cell_i_on_pixel_stride_times_i() -> None:
    # With mirror-symmetric kernels a CNN commutes with a horizontal flip exactly when the flip
    # maps every cell centre onto a cell centre. Centres at stride * i (the grid frame's
    # assumption, see TransforMatcher.frame_shift) make that true for sizes 2^k + 1 (65 -> 33
    # -> 17 -> 9 -> 5 -> 3), centres at block middles stride * i + (stride - 1) / 2 for
    # 2^k (64): the first holds, the second does not.
    torch.manual_seed(0)
    for net in (EfficientNetLite0(), ResNet101()):
        net.eval()
        with torch.no_grad():
            for module in net.modules():
                if isinstance(module, torch.nn.Conv2d):
                    module.weight.copy_((module.weight + module.weight.flip(-1)) / 2)
            for size, equivariant in ((65, True), (64, False)):
                x = torch.rand(1, 3, size, size) * 255
                for f, g in zip(net.features(x), net.features(x.flip(-1)), strict=True):
                    gap = ((g - f.flip(-1)).abs().amax() / f.abs().amax()).item()
                    assert gap < 1e-4 if equivariant else gap > 1e-2


def test_transfer_works_in_the_grid_frame() -> None:
    torch.manual_seed(0)
    model = TransforMatcher(grid=4)
    assert model.frame_shift == pytest.approx(7.5 * 2 / 64)  # half a cell minus half a pixel
    coords = grid_centres(8, 8)[None] + 0.05 * torch.randn(1, 8, 8, 2)
    kp = torch.cat((torch.rand(1, 5, 2) * 2 - 1, torch.full((1, 1, 2), -0.99)), dim=1)
    # An image point u is at u + shift in the grid frame; targets come back the same way.
    shift = 7.5 * 2 / 64
    expected = soft_sample(coords, kp + shift, 0.05) - shift
    assert (expected.abs() > 1).any()  # some fall outside the image: transfer clamps them
    torch.testing.assert_close(model.transfer(coords, kp, 0.05), expected.clamp(-1, 1))
    # Pixel 16 j (the backbone's cell j, 64 px image) lands on grid cell j's centre.
    pixel = torch.tensor([[[16.0 * 2, 16.0 * 1]]])
    torch.testing.assert_close(pixels_to_normalised(pixel, 64, 64) + model.frame_shift,
                               grid_centres(4, 4)[1, 2].reshape(1, 1, 2))


def _bilinear_1d(n_in: int, n_out: int) -> np.ndarray:
    """Interpolation matrix [n_out, n_in] of align_corners=False bilinear resizing."""
    m = np.zeros((n_out, n_in))
    for o in range(n_out):
        s = min(max((o + 0.5) * n_in / n_out - 0.5, 0.0), n_in - 1)
        lo = math.floor(s)
        hi = min(lo + 1, n_in - 1)
        m[o, lo] += 1 - (s - lo)
        m[o, hi] += s - lo
    return m


def test_4d_upsampling_is_multilinear_interpolation() -> None:
    corr = torch.rand(1, 3, 2, 3, 4, dtype=torch.float64)
    up = upsample_correlation(corr, 2)
    mats = [_bilinear_1d(n, 2 * n) for n in (3, 2, 3, 4)]
    expected = np.einsum("ai,bj,ck,dl,ijkl->abcd", *mats, corr[0].numpy())
    np.testing.assert_allclose(up[0].numpy(), expected, atol=1e-12)


def test_kernel_soft_argmax_peak_and_plain_softmax_limit() -> None:
    corr = torch.zeros(1, 2, 2, 5, 6)
    corr[0, 1, 0, 3, 4] = 1.0
    centres = grid_centres(5, 6)
    coords = kernel_soft_argmax(corr, sigma=2.0, beta=200.0)
    torch.testing.assert_close(coords[0, 1, 0], centres[3, 4])
    # A very wide kernel leaves the softmax expectation.
    scores = torch.randn(1, 1, 1, 5, 6, dtype=torch.float64)
    weights = (3.0 * scores.flatten()).softmax(0)
    expected = (weights[:, None] * centres.double().reshape(-1, 2)).sum(0)
    torch.testing.assert_close(kernel_soft_argmax(scores, sigma=1e6, beta=3.0)[0, 0, 0], expected)


def test_kernel_suppresses_a_distant_second_peak() -> None:
    corr = torch.zeros(1, 1, 1, 1, 30)
    corr[..., 2] = 1.0
    corr[..., 27] = 0.99
    plain = kernel_soft_argmax(corr, sigma=1e6, beta=50.0)[..., 0]
    kernel = kernel_soft_argmax(corr, sigma=3.0, beta=50.0)[..., 0]
    target = grid_centres(1, 30)[0, 2, 0]
    assert (kernel - target).abs() < 0.01 < (plain - target).abs()


def test_hard_argmax_and_gradient_of_soft_argmax() -> None:
    corr = torch.randn(2, 3, 3, 4, 4, requires_grad=True)
    best = corr.flatten(3).argmax(-1)
    torch.testing.assert_close(hard_argmax(corr), grid_centres(4, 4).reshape(-1, 2)[best])
    kernel_soft_argmax(corr, 2.0, 5.0).sum().backward()
    assert corr.grad is not None and corr.grad.abs().sum() > 0


def test_soft_sampler_formula_and_sharp_limit() -> None:
    coords = torch.rand(1, 3, 4, 2, dtype=torch.float64) * 2 - 1
    kp = torch.tensor([[[0.1, -0.3], [-0.9, 0.8]]], dtype=torch.float64)
    centres = grid_centres(3, 4, dtype=torch.float64).reshape(-1, 2)
    out = soft_sample(coords, kp, tau=0.1)
    for n in range(2):
        w = (-(kp[0, n] - centres).norm(dim=-1) / 0.1).softmax(0)
        torch.testing.assert_close(out[0, n], (w[:, None] * coords.reshape(-1, 2)).sum(0))
    at_centre = centres[5][None, None]
    torch.testing.assert_close(soft_sample(coords, at_centre, tau=1e-4)[0, 0], coords[0, 1, 1])


def test_pixel_normalised_round_trip() -> None:
    pts = torch.tensor([[0.0, 0.0], [239.0, 119.5], [-0.5, -0.5]])
    norm = pixels_to_normalised(pts, 240, 120)
    torch.testing.assert_close(norm[2], torch.tensor([-1.0, -1.0]))
    torch.testing.assert_close(normalised_to_pixels(norm, 240, 120), pts)


def test_keypoint_loss_is_mean_distance_of_valid_points() -> None:
    pred = torch.tensor([[[0.0, 0.0], [1.0, 1.0], [5.0, 5.0]]])
    gt = torch.tensor([[[3.0, 4.0], [1.0, 2.0], [0.0, 0.0]]])
    valid = torch.tensor([[True, True, False]])
    torch.testing.assert_close(keypoint_loss(pred, gt, valid), torch.tensor(3.0))
    with pytest.raises(ValueError, match="valid"):
        keypoint_loss(pred, gt, valid[:, :2])


@pytest.fixture(scope="module")
def small_model() -> TransforMatcher:
    torch.manual_seed(0)
    return TransforMatcher(grid=4, depth=2)


def test_model_shapes_and_zero_head_start(small_model: TransforMatcher) -> None:
    src, tgt = torch.rand(2, 1, 3, 64, 64) * 255
    out = small_model.eval()(src, tgt)
    assert out["corr"].shape == (1, 11, 4, 4, 4, 4)
    assert out["refined"].shape == (1, 8, 8, 8, 8)
    assert out["coords"].shape == (1, 8, 8, 2)
    # The head starts at zero: the refined map is the upsampled mean correlation.
    torch.testing.assert_close(out["refined"], upsample_correlation(out["corr"].mean(1)))
    assert raw_argmax_coords(out["corr"]).shape == (1, 8, 8, 2)
    with pytest.raises(ValueError, match="src"):
        small_model(torch.rand(1, 3, 60, 64), tgt)


def test_training_step_reaches_refiner_not_backbone(small_model: TransforMatcher) -> None:
    small_model.train()
    src, tgt = torch.rand(2, 1, 3, 64, 64) * 255
    out = small_model(src, tgt)
    kp = torch.rand(1, 5, 2) * 2 - 1
    keypoint_loss(soft_sample(out["coords"], kp, 0.1), kp).backward()
    assert small_model.refiner.head.weight.grad.abs().sum() > 0
    # The head starts at zero, so the first step cannot reach the layers below it yet.
    assert small_model.refiner.layers[0].attn.qkv.weight.grad.abs().sum() == 0
    assert all(p.grad is None for p in small_model.backbone.parameters())
    assert not small_model.backbone.training


def test_refiner_mixes_matches_through_attention() -> None:
    torch.manual_seed(1)
    for attention in ("additive", "standard"):
        model = TransforMatcher(grid=4, depth=1, attention=attention).eval()
        torch.nn.init.normal_(model.refiner.head.weight)
        corr = torch.rand(1, 11, 4, 4, 4, 4)
        corr2 = corr.clone()
        corr2[0, :, 0, 0, 0, 0] += 1.0  # one match changes; other matches' scores follow
        delta = model.refiner(corr2) - model.refiner(corr)
        assert delta.flatten()[1:].abs().amax() > 1e-4


def _reference_attention(attn: MatchToMatchAttention, x: torch.Tensor,
                         positions: torch.Tensor) -> torch.Tensor:
    """The attention of Eq. 5-6 written out per head in [B, heads, T, D] with explicit
    softmaxes and a real-valued rotation of each channel pair."""
    h, d = attn.heads, attn.head_dim
    q, k, v = (x @ attn.qkv.weight.T + attn.qkv.bias).chunk(3, dim=-1)
    angles = rope4d_angles(positions, h * d)
    cos, sin = angles.cos(), angles.sin()

    def rotate(t: torch.Tensor) -> torch.Tensor:
        a, b = t[..., 0::2], t[..., 1::2]
        return torch.stack((a * cos - b * sin, a * sin + b * cos), dim=-1).flatten(-2)

    q, k = rotate(q), rotate(k)
    q, k, v = (t.unflatten(-1, (h, d)).transpose(1, 2) for t in (q, k, v))  # [B, h, T, d]
    if attn.attention == "standard":
        u = (q @ k.transpose(-1, -2) / math.sqrt(d)).softmax(-1) @ v
    else:
        alpha = ((q * attn.w_q[:, None]).sum(-1) / math.sqrt(d)).softmax(-1)  # [B, h, T]
        g_q = (alpha[..., None] * q).sum(2, keepdim=True)
        p = g_q * k
        beta = ((p * attn.w_k[:, None]).sum(-1) / math.sqrt(d)).softmax(-1)
        u = (beta[..., None] * p).sum(2, keepdim=True) * v + q
    return u.transpose(1, 2).flatten(2) @ attn.out.weight.T + attn.out.bias


@pytest.mark.parametrize("attention", ["additive", "standard"])
def test_attention_layer_matches_the_written_out_formula(attention: str) -> None:
    torch.manual_seed(2)
    attn = MatchToMatchAttention(attention=attention).double()
    positions = match_positions(2, 3, 3, 2, dtype=torch.float64)
    x = torch.randn(2, positions.shape[0], 16, dtype=torch.float64)
    rotation = rope4d_rotation(rope4d_angles(positions, 32))
    torch.testing.assert_close(attn(x, rotation), _reference_attention(attn, x, positions))


def test_head_state_dict_round_trip(small_model: TransforMatcher) -> None:
    state = small_model.head_state_dict()
    assert not any(k.startswith("backbone.") for k in state)
    other = TransforMatcher(grid=4, depth=2)
    other.load_trained_state_dict(state)
    for key, value in other.head_state_dict().items():
        torch.testing.assert_close(value, state[key])
    with pytest.raises(ValueError, match="missing"):
        other.load_trained_state_dict(dict(itertools.islice(state.items(), 3)))


def test_the_kept_rotation_is_the_grids_and_serves_training_after_inference() -> None:
    torch.manual_seed(0)
    refiner = MatchRefiner(5, depth=1)
    torch.nn.init.normal_(refiner.head.weight)  # non-zero: the scores depend on the layers
    for grid in ((2, 3, 3, 2), (3, 2, 2, 2)):
        rotation = refiner._rotation(grid, torch.device("cpu"))
        expected = rope4d_rotation(rope4d_angles(match_positions(*grid), refiner.inner,
                                                 refiner.rope_base))
        torch.testing.assert_close(rotation, expected)
    corr = torch.rand(1, 5, 2, 3, 3, 2)
    with torch.inference_mode():
        before = refiner(corr)  # fills the cache inside inference mode
    score = refiner(corr.requires_grad_())
    score.sum().backward()  # the kept rotation can be saved for backward
    torch.testing.assert_close(score.detach(), before)
    assert corr.grad is not None and corr.grad.abs().sum() > 0


@given(st.lists(st.integers(1, 5), min_size=1, max_size=4))
@settings(max_examples=30, deadline=None)
def test_resampling_layers_keeps_stage_ends_and_is_the_identity_on_equal_stages(
        stages: list[int]) -> None:
    gen = torch.Generator().manual_seed(len(stages))
    corr = torch.rand(2, sum(stages), 3, 3, generator=gen)
    torch.testing.assert_close(resample_layers(corr, tuple(stages), tuple(stages)), corr)
    to = tuple(n + 1 for n in stages)
    out = resample_layers(corr, tuple(stages), to)
    assert out.shape == (2, sum(to), 3, 3)
    start_in = start_out = 0
    for n_in, n_out in zip(stages, to, strict=True):
        torch.testing.assert_close(out[:, start_out], corr[:, start_in])  # first layer
        torch.testing.assert_close(out[:, start_out + n_out - 1],
                                   corr[:, start_in + n_in - 1] if n_in > 1 else corr[:, start_in])
        start_in, start_out = start_in + n_in, start_out + n_out


def test_resampling_four_layers_to_three_interpolates_at_thirds() -> None:
    corr = torch.arange(4.0).view(1, 4, 1)  # layer i holds the value i
    out = resample_layers(corr, (4,), (3,))
    torch.testing.assert_close(out.flatten(), torch.tensor([0.0, 1.5, 3.0]))
    with pytest.raises(ValueError, match="sum\\(stages\\) = 5 channels"):
        resample_layers(corr, (2, 3), (3, 3))


def test_an_extra_backbone_is_averaged_in_and_never_saved(monkeypatch: pytest.MonkeyPatch
                                                          ) -> None:
    # random Lite2 weights: the package with the published ones is optional
    monkeypatch.setattr(backbone_module.EfficientNetLite, "pretrained",
                        classmethod(lambda cls, variant=0: cls(variant).eval()))
    torch.manual_seed(0)
    model = TransforMatcher(grid=3, extra_backbone="efficientnet-lite2").eval()
    alone = TransforMatcher(grid=3).eval()
    alone.backbone.load_state_dict(model.backbone.state_dict())
    src, tgt = torch.rand(1, 3, 48, 48) * 255, torch.rand(1, 3, 48, 48) * 255
    with torch.no_grad():
        lite2 = model.extra_backbone.features(torch.cat((src, tgt)))
        extra = multilayer_correlation([f[:1] for f in lite2], [f[1:] for f in lite2], (3, 3))
        expected = (alone.correlation(src, tgt)
                    + resample_layers(extra, (4, 4, 5, 1), (3, 3, 4, 1))) / 2
        torch.testing.assert_close(model.correlation(src, tgt), expected)
    assert set(model.head_state_dict()) == set(alone.head_state_dict())
    model.train()
    assert not model.extra_backbone.training and not any(
        p.requires_grad for p in model.extra_backbone.parameters())
    with pytest.raises(ValueError, match="extra_backbone must have the stages"):
        TransforMatcher(grid=3, extra_backbone="resnet101")
