from __future__ import annotations

import numpy as np
import pytest
import torch

from crossview.data.augment import stereo_augmentor
from crossview.data.camera_effects import CameraEffects, ViewEffects, luma
from crossview.data.synthetic.stereo import StereoConfig, SyntheticStereo

CLEAN = ViewEffects(gain=1.0, gamma=1.0, vignetting=0.0, blur_sigma=0.0, read_noise=0.0,
                    shot_noise=0.0)


def _image(seed: int = 0, size: tuple[int, int] = (40, 56)) -> torch.Tensor:
    return torch.from_numpy(np.random.default_rng(seed).uniform(20, 230, (3, *size))).float()


def _rng() -> np.random.Generator:
    return np.random.default_rng(7)


def test_no_effect_keeps_the_image_up_to_8_bit_rounding() -> None:
    image = _image()
    out = CameraEffects().apply(image, CLEAN, grey=False, rng=_rng())
    assert torch.equal(out, image.round())
    raw = CameraEffects(quantise=False).apply(image, CLEAN, grey=False, rng=_rng())
    torch.testing.assert_close(raw, image, rtol=1e-6, atol=1e-4)


@pytest.mark.parametrize("gain", [0.5, 0.8, 1.3])
def test_gain_scales_unclipped_values(gain: float) -> None:
    image = _image() * 0.7
    view = ViewEffects(gain, 1.0, 0.0, 0.0, 0.0, 0.0)
    out = CameraEffects(quantise=False).apply(image, view, grey=False, rng=_rng())
    torch.testing.assert_close(out, image * gain, rtol=1e-5, atol=1e-3)


def test_gamma_is_the_tone_curve_and_clips_at_white() -> None:
    image = torch.full((3, 4, 5), 64.0)
    out = CameraEffects(quantise=False).apply(image, ViewEffects(8.0, 0.5, 0.0, 0.0, 0.0, 0.0),
                                              grey=False, rng=_rng())
    assert torch.allclose(out, torch.full_like(out, 255.0))  # 64 * 8 clips to white
    out = CameraEffects(quantise=False).apply(image, ViewEffects(1.0, 0.5, 0.0, 0.0, 0.0, 0.0),
                                              grey=False, rng=_rng())
    torch.testing.assert_close(out, torch.full_like(out, 255.0 * (64 / 255) ** 0.5))


def test_grey_gives_three_equal_luma_channels() -> None:
    image = _image()
    out = CameraEffects(quantise=False).apply(image, CLEAN, grey=True, rng=_rng())
    assert torch.equal(out[0], out[1]) and torch.equal(out[1], out[2])
    torch.testing.assert_close(out[:1], luma(image))


def test_vignetting_darkens_corners_not_centre() -> None:
    image = torch.full((3, 41, 61), 200.0)
    out = CameraEffects(quantise=False).apply(image, ViewEffects(1.0, 1.0, 0.3, 0.0, 0.0, 0.0),
                                              grey=False, rng=_rng())
    assert out[0, 20, 30] == pytest.approx(200.0)
    assert out[0, 0, 0] == pytest.approx(200.0 * 0.7, rel=1e-5)


def test_blur_keeps_flat_images_and_the_mean_and_smooths_detail() -> None:
    flat = torch.full((3, 20, 30), 90.0)
    effects = CameraEffects(quantise=False)
    view = ViewEffects(1.0, 1.0, 0.0, 1.0, 0.0, 0.0)
    torch.testing.assert_close(effects.apply(flat, view, grey=False, rng=_rng()), flat)
    image = _image()
    out = effects.apply(image, view, grey=False, rng=_rng())
    assert out.diff(dim=-1).abs().mean() < 0.5 * image.diff(dim=-1).abs().mean()
    assert out.mean().item() == pytest.approx(image.mean().item(), rel=0.02)


@pytest.mark.parametrize(("read", "shot", "level"), [(3.0, 0.0, 100.0), (0.0, 4.0, 255.0 / 4),
                                                     (2.0, 2.0, 128.0)])
def test_noise_std_is_read_plus_shot_noise(read: float, shot: float, level: float) -> None:
    image = torch.full((3, 200, 200), level)
    out = CameraEffects(quantise=False).apply(image, ViewEffects(1.0, 1.0, 0.0, 0.0, read, shot),
                                              grey=False, rng=_rng())
    expected = read + shot * (level / 255) ** 0.5
    assert (out - image).std().item() == pytest.approx(expected, rel=0.03)
    assert (out - image).mean().abs().item() < 0.1


def test_a_pair_is_deterministic_per_generator_and_views_differ() -> None:
    effects = CameraEffects(exposure=1.0, grey_probability=0.0)
    a0, a1 = effects(_image(1), _image(1), np.random.default_rng(3))
    b0, b1 = effects(_image(1), _image(1), np.random.default_rng(3))
    assert torch.equal(a0, b0) and torch.equal(a1, b1)
    assert not torch.equal(a0, a1)  # each camera of the rig draws its own effects
    assert a0.dtype == torch.float32 and a0.min() >= 0 and a0.max() <= 255
    assert torch.equal(a0, a0.round())


def test_monochrome_is_chosen_for_the_whole_rig() -> None:
    out0, out1 = CameraEffects(grey_probability=1.0)(_image(1), _image(2), _rng())
    for out in (out0, out1):
        assert torch.equal(out[0], out[1]) and torch.equal(out[1], out[2])


@pytest.mark.parametrize(("field", "value"), [
    ("grey_probability", 1.5), ("noise_probability", -0.1), ("gamma", (0.0, 1.0)),
    ("blur_sigma", (2.0, 1.0)), ("exposure", -1.0), ("vignetting", 1.0)])
def test_bad_settings_name_the_field(field: str, value: object) -> None:
    with pytest.raises(ValueError, match=field):
        CameraEffects(**{field: value})


def test_the_augmentor_applies_camera_effects_to_images_only() -> None:
    sample = SyntheticStereo(1, config=StereoConfig(size=(48, 64)))[0]
    plain = stereo_augmentor((40, 56))(sample, np.random.default_rng(5))
    camera = stereo_augmentor((40, 56), camera=CameraEffects(exposure=1.0))(
        sample, np.random.default_rng(5))
    assert torch.equal(plain["disparity"], camera["disparity"])
    assert torch.equal(plain["valid_noc"], camera["valid_noc"])
    assert not torch.equal(plain["image0"], camera["image0"])
