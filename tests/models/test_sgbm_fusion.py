"""The SGBM fusion of stereo disparities (crossview.models.dense.sgbm_fusion): the rule pixel by
pixel, both views' sign conventions, the mirrored right-view SGBM, and the fusion as the
default of the bundled stereo model through the api, ``crossview stereo`` and ``crossview
eval``."""

from __future__ import annotations

import functools
import json
from pathlib import Path

import numpy as np
import pytest
import torch
from PIL import Image

import crossview
from crossview.cli.app import main
from crossview.cli.dense import DenseOptions, unused_network_note
from crossview.data import io
from crossview.export.modules import DenseOutputs
from crossview.export.onnx import dropped_defaults
from crossview.geometry.consistency import noc_mask
from crossview.geometry.disparity import field_to_disparity
from crossview.geometry.edge_weighted_median import edge_weighted_median
from crossview.geometry.out_of_view import extend_out_of_view, out_of_view_strip_end
from crossview.models.dense import sgbm_fusion
from crossview.models.dense.classical import (
    hole_run_length,
    left_right_checked,
    sgbm_disparity,
    sgbm_num_disparities,
    sgbm_right_disparity,
)
from crossview.models.dense.inference import network_settings, predict_fields
from crossview.models.dense.rank_transform import rank_matching_image
from crossview.models.dense.sgbm_fusion import (
    EDGE_MEDIANS,
    FILL,
    FUSION_CONSISTENCY_PX,
    FUSION_NETWORK_RUN_PX,
    FUSION_SGBM_CHECK_PX,
    FUSION_SGBM_RUNS,
    FUSION_SGBM_UNIQUENESS,
    NETWORK,
    OUT_OF_VIEW,
    SGBM,
    fuse_view,
    fuse_with_sgbm,
    fusion_inputs,
    fusion_sources,
    fusion_steps,
    scaled_median,
    view_inputs,
)
from crossview.models.matchstereo.specs import matchstereo_spec
from crossview.models.registry import FusedNetwork, register_model
from small_networks import SMALL

register_model(matchstereo_spec("fusion-test-stereo", SMALL, "stereo", fuse=True), replace=True)
register_model(matchstereo_spec("fusion-test-scaled", SMALL, "stereo", fuse=True, lri=True,
                                refine=True, fused_network=FusedNetwork(0.75)), replace=True)
pytestmark = pytest.mark.filterwarnings("ignore::crossview.api.RandomWeightsWarning")
SHIFT = 6  # px: the right image is the left one moved left by this much (d = SHIFT)


def _pair(h: int = 192, w: int = 208) -> tuple[np.ndarray, np.ndarray]:
    """A textured left image and its right view at constant disparity SHIFT ``[H, W, 3]``."""
    rng = np.random.default_rng(0)
    coarse = rng.integers(0, 256, (h // 4, (w + SHIFT) // 4 + 1, 3), dtype=np.uint8)
    wide = np.asarray(Image.fromarray(coarse).resize((coarse.shape[1] * 4, h), Image.BICUBIC))
    return np.ascontiguousarray(wide[:, :w]), np.ascontiguousarray(wide[:, SHIFT:SHIFT + w])


@pytest.mark.parametrize("network_run", [0, 2])
@pytest.mark.parametrize("seed", range(5))
def test_fuse_view_is_the_rule_pixel_by_pixel(seed: int, network_run: int) -> None:
    rng = np.random.default_rng(seed)
    network = rng.uniform(0, 30, (6, 9)).astype(np.float32)
    consistent = rng.random((6, 9)) < 0.5
    classical = np.where(rng.random((6, 9)) < 0.5, rng.uniform(0, 30, (6, 9)), np.nan)
    fused = fuse_view(network, consistent, classical, network_run=network_run)
    sparse = np.full((6, 9), np.nan)
    for y in range(6):
        for x in range(9):
            run = 0  # the row's run of SGBM holes through (y, x)
            while x - run - 1 >= 0 and np.isnan(classical[y, x - run - 1]):
                run += 1
            after = 0
            while x + after < 9 and np.isnan(classical[y, x + after]):
                after += 1
            run += after
            if np.isfinite(classical[y, x]):  # 1. SGBM where it answers
                sparse[y, x] = classical[y, x]
            elif consistent[y, x] and run > network_run:  # 2. the consistent network in long holes
                sparse[y, x] = network[y, x]
    for y in range(6):  # 3. the rest: the farther of the nearest values along the row
        for x in range(9):
            if np.isfinite(sparse[y, x]):
                assert fused[y, x] == np.float32(sparse[y, x])
                continue
            near = [sparse[y, i] for i in (max((i for i in range(x) if np.isfinite(sparse[y, i])),
                                               default=None),
                                           min((i for i in range(x + 1, 9)
                                                if np.isfinite(sparse[y, i])), default=None))
                    if i is not None]
            assert fused[y, x] == np.float32(min(near) if near else 0.0)


def test_fusion_sources_name_the_step_that_answers() -> None:
    """A row of 12: SGBM answers columns 0-1 and 9-11; the hole 2-8 (7 px) is long enough at
    network_run 4, where the network is consistent at 3-5 only; a second row's hole of 3 px
    is too short for it, consistent or not; a third row has no SGBM at all."""
    network = np.full((3, 12), 20.0, np.float32)
    network[0, 3:6] = [11.0, 12.0, 13.0]
    classical = np.full((3, 12), np.nan, np.float32)
    classical[0, [0, 1, 9, 10, 11]] = [5.0, 5.0, 7.0, 7.0, 7.0]
    classical[1] = 9.0
    classical[1, 4:7] = np.nan
    consistent = np.zeros((3, 12), bool)
    consistent[0, 3:6] = consistent[1] = consistent[2, :6] = True
    sources = fusion_sources(network, consistent, classical, network_run=4)
    assert sources.dtype == np.uint8 and sources.shape == (3, 12)
    assert len({SGBM, NETWORK, FILL}) == 3
    s, n, f = SGBM, NETWORK, FILL
    assert sources.tolist() == [[s, s, f, n, n, n, f, f, f, s, s, s],
                                [s, s, s, s, f, f, f, s, s, s, s, s],
                                [n] * 6 + [f] * 6]
    steps = fusion_steps(network, consistent, classical, network_run=4)
    assert steps.filled is steps.medianed is steps.fused
    np.testing.assert_array_equal(steps.fused, fuse_view(network, consistent, classical,
                                                         network_run=4))
    fused = steps.fused  # each label's value is its source's
    np.testing.assert_array_equal(fused[sources == SGBM], classical[sources == SGBM])
    np.testing.assert_array_equal(fused[sources == NETWORK], network[sources == NETWORK])
    assert fused[0, 2] == 5.0 and (fused[0, 6:9] == 7.0).all()  # the farther neighbour
    assert (fused[1, 4:7] == 9.0).all() and (fused[2, 6:] == 20.0).all()
    # the scale lengthens the run the network needs: 4 * 2 > 7 px, so the fill answers
    scaled = fusion_sources(network, consistent, classical, network_run=4, scale=2.0)
    assert (scaled[0, 2:9] == FILL).all() and (scaled[2, :6] == NETWORK).all()
    with pytest.raises(ValueError, match="differ in shape"):
        fusion_sources(network, consistent[:, 1:], classical)


def test_fusion_steps_keep_what_each_step_changed() -> None:
    rng = np.random.default_rng(7)
    network = np.where(np.arange(40)[None] < 17, 8.0, 2.0).repeat(24, 0).astype(np.float32)
    consistent = rng.random(network.shape) < 0.5
    classical = np.where(rng.random(network.shape) < 0.5, network + 0.25, np.nan)
    image = np.where(np.arange(40)[None, :, None] < 15, 40.0, 200.0) + rng.uniform(
        -2, 2, (*network.shape, 3))
    steps = fusion_steps(network, consistent, classical, image)
    np.testing.assert_array_equal(steps.filled, fuse_view(network, consistent, classical))
    np.testing.assert_array_equal(steps.fused, fuse_view(network, consistent, classical, image))
    medianed = steps.filled
    for settings in EDGE_MEDIANS:
        medianed = edge_weighted_median(medianed, image, **settings)
    np.testing.assert_array_equal(steps.medianed, medianed)
    assert (steps.medianed != steps.filled).any() and (steps.fused != steps.medianed).any()
    np.testing.assert_array_equal(steps.sources, fusion_sources(network, consistent, classical))


def test_fusion_inputs_are_what_fuse_with_sgbm_fuses() -> None:
    left, right = _pair()
    x0, x1 = (torch.from_numpy(v).permute(2, 0, 1)[None].float() for v in (left, right))
    rng = np.random.default_rng(4)
    field = torch.zeros(2, *left.shape[:2], 2)
    field[0, ..., 0] = -torch.from_numpy(rng.uniform(0, 2 * SHIFT, left.shape[:2]))
    field[1, ..., 0] = torch.from_numpy(rng.uniform(0, 2 * SHIFT, left.shape[:2]))
    inputs = fusion_inputs(x0, x1, field)
    assert [view.view for view in inputs] == ["left", "right"]
    fused = fuse_with_sgbm(x0, x1, field).field
    assert np.array_equal(field_to_disparity(fused[:1])[0].numpy(), fuse_view(*inputs[0]))
    assert np.array_equal(field_to_disparity(fused[1:], "right")[0].numpy(),
                          fuse_view(*inputs[1]))
    assert (fusion_sources(*inputs[0][:3]) == SGBM).mean() > 0.5


@pytest.mark.parametrize("seed", range(4))
def test_hole_run_length_against_loops(seed: int) -> None:
    rng = np.random.default_rng(seed)
    disparity = np.where(rng.random((5, 13)) < 0.6, np.nan, 1.0)
    runs = hole_run_length(disparity)
    for y in range(5):
        x = 0
        while x < 13:
            end = x
            while end < 13 and np.isnan(disparity[y, end]):
                end += 1
            if end == x:
                assert runs[y, x] == 0
                x += 1
                continue
            assert (runs[y, x:end] == end - x).all()
            x = end


def test_fuse_view_with_the_image_ends_with_the_edge_median_and_the_strip() -> None:
    rng = np.random.default_rng(7)
    network = np.where(np.arange(40)[None] < 17, 8.0, 2.0).repeat(24, 0).astype(np.float32)
    consistent = rng.random(network.shape) < 0.5
    classical = np.where(rng.random(network.shape) < 0.5, network + 0.25, np.nan)
    # the colour edge is 2 px left of the depth edge: columns 15 and 16 look like the far side
    image = np.where(np.arange(40)[None, :, None] < 15, 40.0, 200.0) + rng.uniform(
        -2, 2, (*network.shape, 3))
    rule = fuse_view(network, consistent, classical)
    filtered = rule
    for settings in EDGE_MEDIANS:
        filtered = edge_weighted_median(filtered, image, **settings)
    fused = fuse_view(network, consistent, classical, image)
    np.testing.assert_array_equal(fused, extend_out_of_view(filtered, **OUT_OF_VIEW))
    assert (rule[:, 15:17] > 7).mean() > 0.5 and (fused[:, 15:17] < 3).all()
    ends = out_of_view_strip_end(filtered)  # the strip x - d < 0 was continued, the rest kept
    assert ends.min() >= 6 and ends.max() <= 10
    strip = np.arange(40)[None] < ends[:, None]
    assert (fused[strip] != filtered[strip]).any()
    np.testing.assert_array_equal(fused[~strip], filtered[~strip])
    mirrored = fuse_view(*(np.ascontiguousarray(m[:, ::-1]) for m in (network, consistent,
                                                                      classical, image)),
                         view="right")
    np.testing.assert_array_equal(mirrored[:, ::-1], fused)


def test_a_scaled_median_pass_keeps_its_samples() -> None:
    for settings in EDGE_MEDIANS:
        assert scaled_median(settings, 1.0) == settings
        doubled = scaled_median(settings, 2.0)
        assert doubled["jump"] == 2 * settings["jump"] and doubled["width"] == 2 * settings["width"]
        assert (doubled["radius"], doubled["step"]) == (2 * settings["radius"],
                                                         2 * settings["step"])
        assert doubled["radius"] // doubled["step"] == settings["radius"] // settings["step"]
        assert scaled_median(settings, 2.0, jumps=1.0)["jump"] == settings["jump"]


def test_fuse_view_at_a_scale_scales_every_step() -> None:
    rng = np.random.default_rng(3)
    network = np.where(np.arange(60)[None] < 30, 9.0, 3.0).repeat(40, 0).astype(np.float32)
    consistent = rng.random(network.shape) < 0.5
    classical = np.where(rng.random(network.shape) < 0.7, network + 0.25, np.nan)
    image = np.where(np.arange(60)[None, :, None] < 27, 40.0, 200.0) + rng.uniform(
        -2, 2, (*network.shape, 3))
    fused = fuse_view(network, consistent, classical, image, network_run=2, scale=1.5)
    expected = fuse_view(network, consistent, classical, network_run=3)
    for settings in EDGE_MEDIANS:
        expected = edge_weighted_median(expected, image, **scaled_median(settings, 1.5))
    expected = extend_out_of_view(expected, **{k: round(v * 1.5) for k, v in OUT_OF_VIEW.items()})
    np.testing.assert_array_equal(fused, expected)


def test_fuse_view_refuses_maps_of_different_shapes() -> None:
    with pytest.raises(ValueError, match="differ in shape"):
        fuse_view(np.zeros((4, 5)), np.zeros((4, 5), bool), np.zeros((4, 6)))
    with pytest.raises(ValueError, match="view"):
        fuse_view(np.zeros((4, 5)), np.zeros((4, 5), bool), np.zeros((4, 5)), view="up")


def test_the_mirrored_sgbm_gives_the_right_views_disparity() -> None:
    left, right = _pair()
    left_d = sgbm_disparity(left, right, 32)
    right_d = sgbm_right_disparity(left, right, 32)
    # away from the borders both views see the constant shift
    for disparity in (left_d[8:-8, 40:-8], right_d[8:-8, 8:-40]):
        known = np.isfinite(disparity)
        assert known.mean() > 0.9
        assert np.abs(disparity[known] - SHIFT).max() < 0.5


@pytest.mark.parametrize("search", [16, 32])
def test_padded_sgbm_answers_at_the_border_where_the_match_is_inside(search: int) -> None:
    left, right = _pair()
    plain = sgbm_disparity(left, right, search)
    padded = sgbm_disparity(left, right, search, pad=True)
    assert padded.shape == plain.shape and padded.dtype == np.float32
    assert np.isnan(plain[:, :search]).all()  # OpenCV's border
    border = padded[8:-8, SHIFT + 4:search]  # the match lies inside the right image
    assert np.isfinite(border).mean() > 0.9
    assert np.abs(border[np.isfinite(border)] - SHIFT).max() < 0.5
    mirrored = sgbm_right_disparity(left, right, search, pad=True)[8:-8, -search:-SHIFT - 4]
    assert np.isfinite(mirrored).mean() > 0.9
    assert np.abs(mirrored[np.isfinite(mirrored)] - SHIFT).max() < 0.5


def test_padded_sgbm_answers_on_narrow_images() -> None:
    left, right = (v[:, :12] for v in _pair())
    padded = sgbm_disparity(left, right, 16, pad=True)
    assert padded.shape == (left.shape[0], 12) and np.isfinite(padded).any()


def _checked_by_loops(disparity: np.ndarray, other: np.ndarray, threshold: float,
                      view: str) -> np.ndarray:
    out = np.full_like(disparity, np.nan)
    for y, x in np.ndindex(*disparity.shape):
        d = disparity[y, x]
        if not np.isfinite(d):
            continue
        match = int(np.floor(x + (-d if view == "left" else d) + 0.5))
        if 0 <= match < disparity.shape[1] and abs(other[y, match] - d) <= threshold:
            out[y, x] = d
    return out


@pytest.mark.parametrize("view", ["left", "right"])
@pytest.mark.parametrize("seed", range(4))
def test_left_right_check_against_loops(view: str, seed: int) -> None:
    rng = np.random.default_rng(seed)
    # integers and quarters: no rounding ties (np.round rounds halves to even)
    maps = rng.integers(0, 5, (2, 7, 11)) + rng.choice([0.0, 0.25], (2, 7, 11))
    maps[rng.random(maps.shape) < 0.2] = np.nan
    maps = maps.astype(np.float32)
    for threshold in (0.25, 1.0):
        checked = left_right_checked(maps[0], maps[1], threshold, view)
        np.testing.assert_array_equal(checked, _checked_by_loops(maps[0], maps[1], threshold,
                                                                 view))
        assert checked.dtype == np.float32


def test_left_right_check_keeps_a_consistent_pair_and_refuses_bad_arguments() -> None:
    left, right = _pair()
    left_d = sgbm_disparity(left, right, 32, pad=True)
    right_d = sgbm_right_disparity(left, right, 32, pad=True)
    kept = left_right_checked(left_d, right_d, 1.0)
    interior = np.isfinite(left_d[8:-8, 16:-8])
    assert np.isfinite(kept[8:-8, 16:-8])[interior].mean() > 0.98
    with pytest.raises(ValueError, match="one shape"):
        left_right_checked(left_d, right_d[:, 1:], 1.0)
    with pytest.raises(ValueError, match="view"):
        left_right_checked(left_d, right_d, 1.0, "up")


@pytest.mark.parametrize("width", [8, 16, 17, 40])
def test_sgbm_on_narrow_images_cuts_its_range(width: int) -> None:
    left, right = (v[:, :width] for v in _pair())
    disparity = sgbm_disparity(left, right, 256)  # OpenCV itself fails on a range >= width
    assert disparity.shape == left.shape[:2] and disparity.dtype == np.float32
    if width <= 16:
        assert np.isnan(disparity).all()


def _sgbm_checked(left: np.ndarray, right: np.ndarray, search: int) -> tuple[np.ndarray, ...]:
    """SGBM on a pair as the fusion runs it, both views left-right checked."""
    sgbm_left = sgbm_disparity(left, right, search, pad=True, uniqueness=FUSION_SGBM_UNIQUENESS)
    sgbm_right = sgbm_right_disparity(left, right, search, pad=True,
                                      uniqueness=FUSION_SGBM_UNIQUENESS)
    return (left_right_checked(sgbm_left, sgbm_right, FUSION_SGBM_CHECK_PX),
            left_right_checked(sgbm_right, sgbm_left, FUSION_SGBM_CHECK_PX, "right"))


@pytest.mark.parametrize("runs", ["shipped", "colour only"])
def test_fuse_with_sgbm_is_the_rule_on_both_views(runs: str,
                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    left, right = _pair()
    x0, x1 = (torch.from_numpy(v).permute(2, 0, 1)[None].float() for v in (left, right))
    rng = np.random.default_rng(1)
    disparities = rng.uniform(0, 2 * SHIFT, (2, *left.shape[:2])).astype(np.float32)
    field = torch.zeros(2, *left.shape[:2], 2)
    field[0, ..., 0] = -torch.from_numpy(disparities[0])  # left view: x = -d
    field[1, ..., 0] = torch.from_numpy(disparities[1])  # right view: x = +d
    search = sgbm_num_disparities(float(disparities.max()))
    colour = _sgbm_checked(left, right, search)
    if runs == "shipped":  # the rank run first, the colour run in its holes
        assert FUSION_SGBM_RUNS == ({"radius": 5, "grey_channels": 2}, {})
        ranked = _sgbm_checked(rank_matching_image(left, 5, 2),
                               rank_matching_image(right, 5, 2), search)
        checked = [np.where(np.isfinite(r), r, c) for r, c in zip(ranked, colour, strict=True)]
    else:
        monkeypatch.setattr(sgbm_fusion, "FUSION_SGBM_RUNS", ({},))
        checked = colour
    fused = fuse_with_sgbm(x0, x1, field).field
    consistent = noc_mask(field, FUSION_CONSISTENCY_PX).numpy()
    expected_left = fuse_view(disparities[0], consistent[0], checked[0], left)
    expected_right = fuse_view(disparities[1], consistent[1], checked[1], right, "right")
    assert np.array_equal(field_to_disparity(fused[:1])[0].numpy(), expected_left)
    assert np.array_equal(field_to_disparity(fused[1:], "right")[0].numpy(), expected_right)
    assert torch.equal(fused[..., 1], field[..., 1])
    assert np.abs(expected_left[8:-8, 40:-8] - SHIFT).mean() < 0.5  # SGBM's answer won


def test_fuse_with_sgbm_makes_the_runs_and_passes_it_is_given() -> None:
    """``runs`` and ``medians`` (what a speed preset keeps): the rank run alone and the narrow
    median pass alone give the rule built from those pieces."""
    left, right = _pair()
    x0, x1 = (torch.from_numpy(v).permute(2, 0, 1)[None].float() for v in (left, right))
    rng = np.random.default_rng(2)
    disparities = rng.uniform(0, 2 * SHIFT, (2, *left.shape[:2])).astype(np.float32)
    field = torch.zeros(2, *left.shape[:2], 2)
    field[0, ..., 0] = -torch.from_numpy(disparities[0])
    field[1, ..., 0] = torch.from_numpy(disparities[1])
    search = sgbm_num_disparities(float(disparities.max()))
    checked = _sgbm_checked(rank_matching_image(left, 5, 2), rank_matching_image(right, 5, 2),
                            search)
    narrow = (EDGE_MEDIANS[1],)
    fused = fuse_with_sgbm(x0, x1, field, runs=FUSION_SGBM_RUNS[:1], medians=narrow).field
    consistent = noc_mask(field, FUSION_CONSISTENCY_PX).numpy()
    assert np.array_equal(field_to_disparity(fused[:1])[0].numpy(),
                          fuse_view(disparities[0], consistent[0], checked[0], left,
                                    medians=narrow))
    assert np.array_equal(field_to_disparity(fused[1:], "right")[0].numpy(),
                          fuse_view(disparities[1], consistent[1], checked[1], right, "right",
                                    medians=narrow))
    with pytest.raises(ValueError, match="at least one SGBM run"):
        fuse_with_sgbm(x0, x1, field, runs=())


def test_fuse_with_sgbm_fuses_each_pair_of_a_batch_as_alone() -> None:
    left, right = _pair()
    pairs = [(left, right), (np.ascontiguousarray(left[::-1]), np.ascontiguousarray(right[::-1]))]
    rng = np.random.default_rng(2)
    fields = []
    for _ in pairs:
        field = torch.zeros(2, *left.shape[:2], 2)
        field[0, ..., 0] = -torch.from_numpy(rng.uniform(0, 2 * SHIFT, left.shape[:2]))
        field[1, ..., 0] = torch.from_numpy(rng.uniform(0, 2 * SHIFT, left.shape[:2]))
        fields.append(field)
    x0, x1 = (torch.stack([torch.from_numpy(p[k]).permute(2, 0, 1).float() for p in pairs])
              for k in (0, 1))
    both = fuse_with_sgbm(x0, x1, torch.cat([f[:1] for f in fields]
                                            + [f[1:] for f in fields])).field
    for i, field in enumerate(fields):
        alone = fuse_with_sgbm(x0[i:i + 1], x1[i:i + 1], field).field
        assert torch.equal(both[i], alone[0]) and torch.equal(both[2 + i], alone[1])


def test_fuse_with_sgbm_refuses_a_field_of_another_size() -> None:
    left, right = _pair()
    x0, x1 = (torch.from_numpy(v).permute(2, 0, 1)[None].float() for v in (left, right))
    with pytest.raises(ValueError, match=r"\[2B, H, W, 2\]"):
        fuse_with_sgbm(x0, x1, torch.zeros(2, 10, 10, 2))


def test_predict_fields_fuses_after_the_network_by_the_models_default() -> None:
    left, right = _pair()
    torch.manual_seed(0)
    model = crossview.load_model("fusion-test-stereo")
    assert model.fuse_by_default
    plain = predict_fields(model, left, right, "stereo", fuse=False)
    default = predict_fields(model, left, right, "stereo")
    x0, x1 = (torch.from_numpy(v).permute(2, 0, 1)[None].float() for v in (left, right))
    fused = fuse_with_sgbm(x0, x1, plain.field).field
    assert torch.equal(default.field, fused)
    assert torch.equal(default.valid, noc_mask(fused, 8.0))
    assert not torch.equal(default.field, plain.field)


def test_the_bundled_default_stereo_model_fuses() -> None:
    model = crossview.load_model("matchstereo-hybrid")
    assert model.fuse_by_default and model.lri_by_default and model.refine_by_default
    assert model.fused_network == FusedNetwork(scale=0.75, lri=False, refine=False,
                                               max_pixels=700_000, align_px=0.0,
                                               classical_runs=2, median_passes=(0, 1))


def test_a_fusing_run_takes_the_fused_networks_settings() -> None:
    left, right = _pair(288, 320)
    torch.manual_seed(0)
    model = crossview.load_model("fusion-test-scaled")
    default = predict_fields(model, left, right, "stereo")
    # the preset's lri and refinement (off), where the model's own defaults are on
    explicit = predict_fields(model, left, right, "stereo", fuse=True, lri=False, refine=False)
    assert torch.equal(default.field, explicit.field)
    assert network_settings(model, "stereo", True, None, None, None, (288, 320)) == (
        False, False, (216, 240))
    # without the fusion, and where asked for, the model's own defaults and the request hold
    assert network_settings(model, "stereo", False, None, None, None, (192, 208)) == (
        True, True, None)
    assert network_settings(model, "stereo", True, True, None, (64, 64), (192, 208)) == (
        True, False, (64, 64))
    # a scaled pair below the model's least size runs at its own size
    least_h, least_w = model.min_shape("stereo")
    assert network_settings(model, "stereo", True, None, None, None,
                            (least_h - 31, least_w - 31)) == (False, False, None)


def test_fused_network_scales_are_checked() -> None:
    for scale in (0.0, 1.5):
        with pytest.raises(ValueError, match="scale"):
            FusedNetwork(scale)


def _run(args: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str]:
    with pytest.raises(SystemExit) as done:
        main(args)
    return done.value.code, capsys.readouterr().err


def test_stereo_command_fuses_unless_told_not_to(tmp_path: Path,
                                                 capsys: pytest.CaptureFixture[str]) -> None:
    left, right = _pair()
    paths = tmp_path / "left.png", tmp_path / "right.png"
    for path, image in zip(paths, (left, right), strict=True):
        Image.fromarray(image).save(path)
    written = {}
    for flag in ("--fuse", "--no-fuse"):
        torch.manual_seed(0)
        code, err = _run(["stereo", *map(str, paths), "-o", str(tmp_path / flag),
                          "--model", "fusion-test-stereo", "--format", "npy", flag], capsys)
        assert code == 0, err
        written[flag] = io.read_npy(tmp_path / flag / "left_disp.npy")
    torch.manual_seed(0)
    model = crossview.load_model("fusion-test-stereo")
    for flag, fuse in (("--fuse", True), ("--no-fuse", False)):
        expected = crossview.estimate_disparity(left, right, model=model, fuse=fuse)
        assert np.array_equal(written[flag], expected.disparity[0].numpy())
    assert not np.array_equal(written["--fuse"], written["--no-fuse"])


def test_eval_scores_the_fused_model_beside_its_network_alone(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    left, right = _pair()
    scene = tmp_path / "scenes" / "shifted"
    scene.mkdir(parents=True)
    Image.fromarray(left).save(scene / "left.png")
    Image.fromarray(right).save(scene / "right.png")
    np.save(scene / "gt.npy", np.full(left.shape[:2], SHIFT, np.float32))
    out = tmp_path / "eval.json"
    code, err = _run(["eval", "--model", "fusion-test-stereo", "--dataset",
                      f"scenes:{tmp_path / 'scenes'}", "--json", str(out)], capsys)
    assert code == 0, err
    report = json.loads(out.read_text())
    assert report["fuse"] is None  # the model's default
    names = [b["name"] for b in report["baselines"]]
    assert names[:4] == ["network alone", "network self-fused", "SGBM", "SGBM filled"]
    alone = report["baselines"][0]["mean"]["bad2_holes"]
    assert report["mean"]["bad2_holes"] != alone  # a random network: SGBM decides the fused


def test_an_onnx_export_of_a_fusing_model_says_it_lacks_the_fusion() -> None:
    model = crossview.load_model("fusion-test-stereo")
    module = DenseOutputs(model, lri=False, refine=False)
    assert dropped_defaults(module) == [("--no-fuse", "SGBM fusion")]


def test_the_network_share_counts_the_pixels_the_network_answers() -> None:
    """``network_share`` of each view is the share of :data:`NETWORK` in its
    :func:`fusion_sources`; the fused run carries it to ``StereoResult``, the unfused not."""
    left, right = _pair()
    x0, x1 = (torch.from_numpy(v).permute(2, 0, 1)[None].float() for v in (left, right))
    field = torch.zeros(2, *left.shape[:2], 2)
    field[0, ..., 0], field[1, ..., 0] = -SHIFT, SHIFT  # consistent everywhere
    inputs = fusion_inputs(x0, x1, field)
    for run in (1, FUSION_NETWORK_RUN_PX):  # every hole is the network's, then only long ones
        with pytest.MonkeyPatch.context() as patch:
            patch.setattr(sgbm_fusion, "fusion_sources", functools.partial(
                lambda *maps, network_run, scale, run: fusion_sources(
                    *maps, network_run=run, scale=scale), run=run))
            share = fuse_with_sgbm(x0, x1, field).network_share
        expected = [(fusion_sources(*view[:3], network_run=run) == NETWORK).mean()
                    for view in inputs]
        assert share.shape == (2,) and share.dtype == torch.float32
        assert share.tolist() == pytest.approx(expected)
        assert (share.max() > 0) == (run == 1)
    torch.manual_seed(0)
    model = crossview.load_model("fusion-test-stereo")
    fused = crossview.estimate_disparity(left, right, model=model)
    assert fused.network_share is not None and fused.network_share.shape == (1,)
    assert 0.0 <= float(fused.network_share[0]) < 0.5  # SGBM answers the textured pair
    assert crossview.estimate_disparity(left, right, model=model, fuse=False).network_share \
        is None


def test_a_changed_network_that_answers_nothing_is_noted(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """``--adapt`` on a fused run whose answer is SGBM's and the fill's: a ``note:`` naming the
    change and ``--no-fuse``; none for the model's own weights, none unfused."""
    left, right = _pair()
    paths = tmp_path / "left.png", tmp_path / "right.png"
    for path, image in zip(paths, (left, right), strict=True):
        Image.fromarray(image).save(path)
    errors = {}
    for name, extra in (("own", []), ("adapted", ["--adapt", "1"]),
                        ("alone", ["--adapt", "1", "--no-fuse"])):
        torch.manual_seed(0)
        code, err = _run(["stereo", *map(str, paths), "-o", str(tmp_path / name),
                          "--model", "fusion-test-stereo", "--format", "npy", *extra], capsys)
        assert code == 0, err
        errors[name] = err
    assert "so --adapt 1 changed little of this answer" in errors["adapted"]
    assert "--no-fuse shows the network's own answer" in errors["adapted"]
    assert "network answered" not in errors["own"] + errors["alone"]


@pytest.mark.parametrize(("weights", "adapt", "share", "noted"), [
    (None, 0, 0.0, False), ("w.safetensors", 0, 0.0, True), (None, 3, 0.005, True),
    (None, 3, 0.02, False), (None, 3, None, False)])
def test_the_unused_network_note_needs_a_change_and_no_share(
        weights: str | None, adapt: int, share: float | None, noted: bool) -> None:
    options = DenseOptions(Path("out"), "fusion-test-stereo",
                           None if weights is None else Path(weights), "cpu", "fp32", None,
                           None, False, False, "npy", adapt=adapt)
    note = unused_network_note(options, None if share is None else torch.tensor([share]),
                               "left.png")
    assert (note is not None) == noted
    if noted:
        assert note.startswith("note: the network answered") and "--no-fuse" in note


def test_a_given_consistency_mask_is_the_one_computed_and_checked() -> None:
    """``fuse_with_sgbm`` hands the fusion torch's mask (faster); it equals what
    :func:`view_inputs` computes with numpy (where torch's kernels use FMA, as CI's), and a
    mask of another shape is refused."""
    left, right = _pair()
    x0, x1 = (torch.from_numpy(v).permute(2, 0, 1)[None].float() for v in (left, right))
    rng = np.random.default_rng(5)
    field = torch.zeros(2, *left.shape[:2], 2)
    field[0, ..., 0] = -torch.from_numpy(rng.uniform(SHIFT - 1, SHIFT + 1, left.shape[:2]))
    field[1, ..., 0] = torch.from_numpy(rng.uniform(SHIFT - 1, SHIFT + 1, left.shape[:2]))
    given = fusion_inputs(x0, x1, field)
    computed = view_inputs([left], [right], field.numpy())
    for a, b in zip(given, computed, strict=True):
        assert 0 < a.consistent.mean() < 1
        if torch.backends.cpu.get_cpu_capability() in {"AVX2", "AVX512"}:
            assert np.array_equal(a.consistent, b.consistent)
    with pytest.raises(ValueError, match="consistent must be"):
        view_inputs([left], [right], field.numpy(), consistent=np.ones((2, 4, 4), bool))
