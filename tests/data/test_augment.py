from __future__ import annotations

import numpy as np
import pytest
import torch

from crossview.data.augment import (
    Augmentor,
    ColorJitter,
    JitterParams,
    SpatialParams,
    erase_rectangles,
    flow_augmentor,
    spatial_transform,
    stereo_augmentor,
)
from crossview.data.synthetic.flow import FlowConfig, SyntheticFlow
from crossview.data.synthetic.stereo import StereoConfig, SyntheticStereo
from crossview.geometry.warp import backward_warp, warp_by_disparity

STEREO = SyntheticStereo(3, seed=11, config=StereoConfig(size=(48, 96), texel_scale=(0.25, 0.5)))
FLOW = SyntheticFlow(3, seed=11, config=FlowConfig(size=(48, 96), texel_scale=(0.25, 0.5)))
GEOMETRY_ONLY = {"color": None, "erase_probability": 0.0}


def _image(seed: int = 0) -> torch.Tensor:
    return torch.rand(3, 8, 10, generator=torch.Generator().manual_seed(seed)) * 255


class TestColorJitter:
    def test_identity_parameters(self) -> None:
        image = _image()
        params = JitterParams(order=(0, 1, 2, 3), brightness=1.0, contrast=1.0, saturation=1.0,
                              hue=0.0)
        torch.testing.assert_close(ColorJitter.apply(image, params), image, atol=1e-3, rtol=0)

    def test_each_step_against_its_formula(self) -> None:
        image = _image(1)
        grey = (0.299 * image[0] + 0.587 * image[1] + 0.114 * image[2])[None]
        out = ColorJitter.apply(image, JitterParams((0,), 0.5, 1.0, 1.0, 0.0))
        torch.testing.assert_close(out, image * 0.5)
        out = ColorJitter.apply(image, JitterParams((2,), 1.0, 1.0, 0.0, 0.0))
        torch.testing.assert_close(out, grey.expand(3, -1, -1))
        out = ColorJitter.apply(image, JitterParams((1,), 1.0, 0.5, 1.0, 0.0))
        torch.testing.assert_close(out, (image - grey.mean()) * 0.5 + grey.mean())

    def test_hue_keeps_grey_and_a_full_turn_is_identity(self) -> None:
        grey = torch.full((3, 4, 4), 100.0)
        out = ColorJitter.apply(grey, JitterParams((3,), 1.0, 1.0, 1.0, 0.15))
        torch.testing.assert_close(out, grey, atol=1e-3, rtol=0)
        image = _image(2) * 0.5 + 60  # away from the clamp
        out = ColorJitter.apply(image, JitterParams((3,), 1.0, 1.0, 1.0, 1.0))
        torch.testing.assert_close(out, image, atol=1e-3, rtol=0)
        shifted = ColorJitter.apply(image, JitterParams((3,), 1.0, 1.0, 1.0, 0.1))
        assert (shifted - image).abs().mean() > 1.0

    def test_output_range_and_bad_shape(self) -> None:
        out = ColorJitter()(_image(3), np.random.default_rng(0))
        assert out.min() >= 0 and out.max() <= 255
        with pytest.raises(ValueError, match="shape"):
            ColorJitter()(torch.zeros(1, 8, 8), np.random.default_rng(0))


def test_erase_fills_rectangles_with_the_mean_colour() -> None:
    image = _image(4)
    same = erase_rectangles(image, np.random.default_rng(0), probability=0.0)
    assert torch.equal(same, image)
    out = erase_rectangles(image, np.random.default_rng(0), probability=1.0, sizes=(3, 4),
                           count=(1, 1))
    changed = (out != image).any(0)
    assert changed.any()
    torch.testing.assert_close(out[:, changed], image.reshape(3, -1).mean(1, keepdim=True)
                               .expand(-1, int(changed.sum())))


def test_spatial_transform_scales_labels_and_jitters_image1_rows() -> None:
    sample = {"image0": _image(5), "image1": _image(6), "disparity": torch.full((8, 10), 2.0),
              "flow": torch.ones(2, 8, 10), "valid_noc": torch.ones(8, 10, dtype=torch.bool),
              "focal_length": torch.tensor(50.0)}
    out = spatial_transform(sample, SpatialParams(size=(16, 30), top=3, left=4), (8, 12))
    assert out["image0"].shape == (3, 8, 12) and out["valid_noc"].shape == (8, 12)
    torch.testing.assert_close(out["disparity"], torch.full((8, 12), 6.0))
    torch.testing.assert_close(out["flow"][0], torch.full((8, 12), 3.0))
    torch.testing.assert_close(out["flow"][1], torch.full((8, 12), 2.0))
    assert out["focal_length"].item() == pytest.approx(150.0)
    same = spatial_transform(sample, SpatialParams(size=(8, 10), top=1, left=2, y_jitter=2),
                             (5, 6))
    # (grid sampling at pixel centres: equal up to float32 rounding)
    torch.testing.assert_close(same["image0"], sample["image0"][:, 1:6, 2:8], atol=1e-3, rtol=0)
    torch.testing.assert_close(same["image1"], sample["image1"][:, 3:8, 2:8], atol=1e-3, rtol=0)
    # the labels of image1's pixels move with it; the reference view's stay
    jittered = spatial_transform({**sample, "disparity1": torch.arange(80.0).view(8, 10),
                                  "disparity": torch.arange(80.0).view(8, 10)},
                                 SpatialParams(size=(8, 10), top=1, left=2, y_jitter=2), (5, 6))
    torch.testing.assert_close(jittered["disparity1"], torch.arange(80.0).view(8, 10)[3:8, 2:8],
                               atol=1e-3, rtol=0)
    torch.testing.assert_close(jittered["disparity"], torch.arange(80.0).view(8, 10)[1:6, 2:8],
                               atol=1e-3, rtol=0)
    flipped = spatial_transform(sample, SpatialParams(size=(8, 10), top=0, left=0, flip_x=True),
                                (8, 10))
    torch.testing.assert_close(flipped["image0"], sample["image0"].flip(-1), atol=1e-3, rtol=0)
    assert (flipped["flow"][0] == -1).all() and (flipped["flow"][1] == 1).all()


def _resize_flip_crop(value: torch.Tensor, params: SpatialParams, crop: tuple[int, int],
                      top: int) -> torch.Tensor:
    """The reference: resize the whole map, flip, then crop."""
    x = value[None, None] if value.ndim == 2 else value[None]
    out = torch.nn.functional.interpolate(x.float(), size=params.size, mode="bilinear",
                                          align_corners=False)[0]
    out = out[0] if value.ndim == 2 else out
    if params.flip_x:
        out = out.flip(-1)
    if params.flip_y:
        out = out.flip(-2)
    return out[..., top:top + crop[0], params.left:params.left + crop[1]]


@pytest.mark.parametrize(("size", "flip_x", "flip_y"), [
    ((20, 31), False, False), ((9, 13), True, False), ((12, 25), True, True), ((14, 17), False,
                                                                               True)])
def test_crop_sampling_equals_resizing_then_cropping(size, flip_x, flip_y) -> None:
    g = torch.Generator().manual_seed(7)
    image = torch.rand(3, 12, 16, generator=g) * 255
    mask = torch.rand(12, 16, generator=g) > 0.2
    params = SpatialParams(size=size, top=size[0] - 8, left=size[1] - 11, y_jitter=-1,
                           flip_x=flip_x, flip_y=flip_y)
    out = spatial_transform({"image0": image, "image1": image, "valid": mask}, params, (8, 11))
    torch.testing.assert_close(out["image0"], _resize_flip_crop(image, params, (8, 11),
                                                                params.top), atol=2e-3, rtol=0)
    torch.testing.assert_close(out["image1"], _resize_flip_crop(image, params, (8, 11),
                                                                params.top - 1), atol=2e-3, rtol=0)
    reference = _resize_flip_crop(mask, params, (8, 11), params.top) > 1 - 1e-4
    assert torch.equal(out["valid"], reference)


@pytest.mark.parametrize("index", range(3))
def test_stereo_augmentation_keeps_labels_consistent_with_images(index: int) -> None:
    sample = STEREO[index]
    out = stereo_augmentor((32, 64), max_y_jitter=0, **GEOMETRY_ONLY)(
        sample, np.random.default_rng(index))
    warped, _ = warp_by_disparity(out["image1"][None], out["disparity"][None])
    error = (warped[0] - out["image0"]).abs().mean(0)[out["valid_noc"]]
    shifted, _ = warp_by_disparity(out["image1"][None], out["disparity"][None] + 0.5)
    assert out["valid_noc"].float().mean() > 0.4
    assert error.mean() < 1.0
    assert (shifted[0] - out["image0"]).abs().mean(0)[out["valid_noc"]].mean() > 2 * error.mean()


@pytest.mark.parametrize("index", range(3))
def test_flow_augmentation_with_flips_keeps_labels_consistent(index: int) -> None:
    sample = FLOW[index]
    augment = flow_augmentor((32, 64), flip_x_probability=1.0, flip_y_probability=1.0,
                             **GEOMETRY_ONLY)
    out = augment(sample, np.random.default_rng(index))
    for image_a, image_b, flow, mask in (
            (out["image0"], out["image1"], out["flow"], out["valid_noc"]),
            (out["image1"], out["image0"], out["flow_backward"], out["valid_noc1"])):
        warped, _ = backward_warp(image_b[None], flow[None])
        error = (warped[0] - image_a).abs().mean(0)[mask]
        assert mask.float().mean() > 0.4 and error.mean() < 1.0


def test_full_augmentation_is_deterministic_and_cropped() -> None:
    augment = stereo_augmentor((32, 48), erase_sizes=(4, 8))
    a = augment(STEREO[0], np.random.default_rng(3))
    b = augment(STEREO[0], np.random.default_rng(3))
    for key in a:
        assert torch.equal(a[key], b[key]), key
    assert a["image0"].shape == a["image1"].shape == (3, 32, 48)
    assert a["disparity"].shape == a["valid_noc"].shape == (32, 48)
    assert a["valid_noc"].dtype == torch.bool
    # as a dataset transform, the augmentation is a pure function of the index
    ds = SyntheticStereo(2, seed=1, config=StereoConfig(size=(40, 64)), transform=augment)
    assert torch.equal(ds[1]["image0"], ds[1]["image0"])


def test_missing_images_and_non_maps_raise() -> None:
    with pytest.raises(ValueError, match="image1"):
        Augmentor((8, 8))({"image0": _image()}, np.random.default_rng(0))
    sample = {"image0": _image(), "image1": _image(1), "keypoints0": torch.zeros(5, 2)}
    with pytest.raises(ValueError, match="keypoints0"):
        Augmentor((6, 6))(sample, np.random.default_rng(0))
