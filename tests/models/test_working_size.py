"""A fused stereo run of a large pair, or at an explicit size, at the working size
(crossview.models.dense.inference): the size rule, the run as the composition of the resized
run and the fields resized back, and the property that matters: disparities come back at the
full size's scale."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from PIL import Image

import crossview
from crossview.errors import UserError
from crossview.geometry.disparity import field_to_disparity
from crossview.models.dense.inference import _fields_at, _images_at, predict_fields, working_size
from crossview.models.matchstereo.specs import matchstereo_spec
from crossview.models.registry import FusedNetwork, register_model
from small_networks import SMALL

CAP = 60_000
register_model(matchstereo_spec("working-size-test", SMALL, "stereo", fuse=True,
                                fused_network=FusedNetwork(0.75, max_pixels=CAP)), replace=True)
pytestmark = pytest.mark.filterwarnings("ignore::crossview.api.RandomWeightsWarning")
SHIFT = 8  # px at the full size: the right image is the left one moved left by this much


def _pair(h: int, w: int) -> tuple[np.ndarray, np.ndarray]:
    """A textured left image and its right view at constant disparity SHIFT ``[H, W, 3]``."""
    rng = np.random.default_rng(1)
    coarse = rng.integers(0, 256, (h // 8, (w + SHIFT) // 8 + 1, 3), dtype=np.uint8)
    wide = np.asarray(Image.fromarray(coarse).resize((coarse.shape[1] * 8, h), Image.BICUBIC))
    return np.ascontiguousarray(wide[:, :w]), np.ascontiguousarray(wide[:, SHIFT:SHIFT + w])


def test_the_working_size_rule() -> None:
    model = crossview.load_model("working-size-test")
    assert working_size(model, "stereo", True, None, (400, 600)) == (200, 300)
    assert working_size(model, "stereo", True, None, (200, 300)) is None  # = CAP pixels
    assert working_size(model, "stereo", False, None, (400, 600)) is None  # not fusing
    assert working_size(model, "stereo", True, (256, 256), (400, 600)) == (256, 256)  # asked
    assert working_size(model, "stereo", True, (800, 900), (400, 600)) == (800, 900)  # above
    assert working_size(model, "stereo", True, (400, 600), (400, 600)) is None  # its own size
    assert working_size(model, "stereo", False, (256, 256), (400, 600)) is None  # network only
    model.fused_network = FusedNetwork(0.75, max_pixels=100)  # below the least size
    assert working_size(model, "stereo", True, None, (400, 600)) is None
    model.fused_network = FusedNetwork(0.75)  # no cap
    assert working_size(model, "stereo", True, None, (4000, 6000)) is None
    with pytest.raises(ValueError, match="max_pixels"):
        FusedNetwork(max_pixels=0)


@settings(max_examples=60, deadline=None)
@given(st.integers(64, 5000), st.integers(64, 5000), st.integers(4096, 2_000_000))
def test_the_working_size_is_the_largest_that_fits_the_cap(h: int, w: int, cap: int) -> None:
    model = crossview.load_model("working-size-test")
    model.fused_network = FusedNetwork(0.75, max_pixels=cap)
    work = working_size(model, "stereo", True, None, (h, w))
    if h * w <= cap:
        assert work is None
        return
    if work is None:  # only when it would fall below the model's least size
        least = model.min_shape("stereo")
        factor = (cap / (h * w)) ** 0.5
        assert int(h * factor) < least[0] or int(w * factor) < least[1]
        return
    wh, ww = work
    assert wh * ww <= cap < (wh + 1) * (ww + 1)  # each side floored: one more is too many
    assert abs(wh / h - ww / w) <= 1 / min(wh, ww)  # the aspect kept


def test_a_large_pair_runs_whole_at_the_working_size() -> None:
    left, right = _pair(400, 600)
    torch.manual_seed(0)
    model = crossview.load_model("working-size-test")
    out = predict_fields(model, left, right, "stereo")
    x0, x1 = (torch.from_numpy(v).permute(2, 0, 1)[None].float() for v in (left, right))
    small = predict_fields(model, _images_at(x0, (200, 300)), _images_at(x1, (200, 300)),
                           "stereo", fuse=True)
    expected = _fields_at(small, (400, 600), 8.0)
    for got, want in zip(out, expected, strict=True):
        assert (got is None and want is None) or torch.equal(got, want)
    assert out.field.shape == (2, 400, 600, 2)
    # SGBM finds SHIFT / 2 at the working size; the disparity comes back at the full scale
    disparity = field_to_disparity(out.field[:1])[0][40:-40, 60:-60]
    assert ((disparity - SHIFT).abs() < 0.5).float().mean() > 0.9
    # without the fusion the pair runs at its own size
    assert predict_fields(model, left, right, "stereo", fuse=False).field.shape == (
        2, 400, 600, 2)


def test_a_fused_run_at_an_asked_size_runs_whole_there() -> None:
    """``size`` with the fusion: network, refinement and SGBM all at that size (not SGBM at
    the full size), even above the cap; the disparities at the full size's scale."""
    left, right = _pair(256, 384)
    torch.manual_seed(0)
    model = crossview.load_model("working-size-test")
    x0, x1 = (torch.from_numpy(v).permute(2, 0, 1)[None].float() for v in (left, right))
    uncapped = crossview.load_model("working-size-test")
    uncapped.load_state_dict(model.state_dict())
    uncapped.fused_network = FusedNetwork(0.75)
    for size in ((192, 288), (320, 480)):  # below and above the cap (CAP = 60,000 px)
        out = predict_fields(model, left, right, "stereo", size=size)
        # the pair as if it had been that size: the fused preset's scale 0.75 applies
        resized = predict_fields(uncapped, _images_at(x0, size), _images_at(x1, size), "stereo")
        assert resized.field.shape[1:3] == size
        for got, want in zip(out, _fields_at(resized, (256, 384), 8.0), strict=True):
            assert (got is None and want is None) or torch.equal(got, want)
        disparity = field_to_disparity(out.field[:1])[0][30:-30, 40:-40]
        assert ((disparity - SHIFT).abs() < 0.5).float().mean() > 0.9
    with pytest.raises(UserError, match=r"size=\(8, 8\) is too small"):
        predict_fields(model, left, right, "stereo", size=(8, 8))
