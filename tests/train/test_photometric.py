from __future__ import annotations

import numpy as np
import pytest
import torch

from crossview.train.photometric import (
    census_distance,
    census_transform,
    forward_backward_mask,
    photometric_loss,
    smoothness,
)


def _texture(h: int = 40, w: int = 56, seed: int = 0) -> torch.Tensor:
    """A smooth random texture ``[1, 3, h, w]`` in 0..255 (bilinear-friendly)."""
    coarse = torch.from_numpy(np.random.default_rng(seed).uniform(0, 255, (1, 3, h // 4, w // 4)))
    return torch.nn.functional.interpolate(coarse.float(), size=(h, w), mode="bicubic",
                                           align_corners=False).clamp(0, 255)


def _shift_pair(dx: int) -> tuple[torch.Tensor, torch.Tensor]:
    """img1 is img0 moved by ``dx`` px to the right (flow +dx), cropped to a common size."""
    base = _texture(40, 56 + dx)
    return base[..., dx:dx + 48].contiguous(), base[..., :48].contiguous()


def _constant_field(b: int, h: int, w: int, u: float) -> torch.Tensor:
    field = torch.zeros(2 * b, h, w, 2)
    field[:b, ..., 0] = u
    field[b:, ..., 0] = -u
    return field


def test_census_is_invariant_to_gain_and_offset() -> None:
    image = _texture()
    brighter = (image * 0.8 + 20.0)
    d = census_distance(census_transform(image), census_transform(brighter))
    # a gain shrinks the differences a little (soft signature); the ordering is kept
    assert d.max() < 0.1
    other = census_distance(census_transform(image), census_transform(_texture(seed=1)))
    assert other.mean() > 5 * d.mean()


def test_the_true_field_costs_less_than_a_wrong_one() -> None:
    img0, img1 = _shift_pair(3)
    # img0(x) = base(x + 3) = img1(x + 3): flow +3 maps img0 to img1
    right, logs = photometric_loss(img0, img1, _constant_field(1, 40, 48, 3.0), smooth_weight=0.0)
    wrong, _ = photometric_loss(img0, img1, _constant_field(1, 40, 48, 0.0), smooth_weight=0.0)
    assert right < 0.2 * wrong
    assert 0.8 < logs["consistent"] < 1.0  # pixels whose match leaves the image are masked


def test_gradient_points_towards_the_true_shift() -> None:
    img0, img1 = _shift_pair(3)
    field = _constant_field(1, 40, 48, 2.5).requires_grad_()
    loss, _ = photometric_loss(img0, img1, field, smooth_weight=0.0)
    loss.backward()
    assert field.grad[:1, ..., 0].sum() < 0  # descending increases u towards 3
    assert field.grad[1:, ..., 0].sum() > 0  # the backward field towards -3


def test_forward_backward_mask_flags_inconsistent_and_outside_matches() -> None:
    field = _constant_field(1, 8, 10, 2.0)
    mask = forward_backward_mask(field)
    assert mask[0, :, :8].all() and not mask[0, :, 8:].any()  # x + 2 > 9 leaves the image
    field[1, 3, 5, 0] = 5.0  # the backward field disagrees where pixel (3, 3) of view 0 lands
    assert not forward_backward_mask(field)[0, 3, 3]


def test_smoothness_is_zero_for_affine_fields_and_weaker_across_edges() -> None:
    h, w = 12, 16
    ys, xs = torch.meshgrid(torch.arange(h).float(), torch.arange(w).float(), indexing="ij")
    affine = torch.stack([0.3 * xs - 0.2 * ys + 1, 0.1 * ys], -1)[None]
    flat_image = torch.full((1, 3, h, w), 100.0)
    assert smoothness(affine, flat_image) == pytest.approx(0.0, abs=1e-5)
    step = torch.zeros(1, h, w, 2)
    step[:, :, w // 2:, 0] = 4.0
    edge_image = flat_image.clone()
    edge_image[..., w // 2:] = 200.0
    assert smoothness(step, edge_image) < 0.01 * smoothness(step, flat_image)


def test_wrong_field_shape_names_the_arguments() -> None:
    img = torch.zeros(1, 3, 8, 8)
    with pytest.raises(ValueError, match="field must be"):
        photometric_loss(img, img, torch.zeros(1, 8, 8, 2), smooth_weight=0.1)
