"""A stereo network's views fused with each other (crossview.models.dense.self_fusion): the
mirrored pair and its fields written out, the sizes of the runs at each scale, the best
matched of the runs per pixel (the least census cost), the steps
written out (consistent pixels kept, the row fill, the edge medians, the strip, the right view
mirrored), every value the network's, the run that takes it (predict_fields, the api, the
command line, eval's row) and what it refuses."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
import torch
from PIL import Image

import crossview
from cli_runner import run_cli
from crossview.data import io
from crossview.errors import UserError
from crossview.geometry.census_arrays import census_codes, census_cost
from crossview.geometry.consistency import consistency_error
from crossview.geometry.disparity import field_to_disparity
from crossview.geometry.edge_weighted_median import edge_weighted_median
from crossview.geometry.out_of_view import extend_out_of_view
from crossview.models.dense import sgbm_fusion
from crossview.models.dense.classical import fill_holes
from crossview.models.dense.inference import predict_fields
from crossview.models.dense.self_fusion import (
    SELF_FUSION_CENSUS_WINDOW,
    SELF_FUSION_CHECK_PX,
    SELF_FUSION_SCALES,
    best_matched,
    fuse_with_itself,
    mirrored,
    mirrored_fields,
    self_fused_disparities,
    self_fused_pair,
    self_fusion_sizes,
)
from crossview.models.matchstereo.specs import matchstereo_spec
from crossview.models.registry import register_model
from crossview.train.pair_adaptation import AdaptationSettings, adapt_to_pair
from offset_pairs import offset_pair
from small_networks import SMALL

register_model(matchstereo_spec("self-fusion-test", SMALL, "stereo", fuse=True), replace=True)
pytestmark = pytest.mark.filterwarnings("ignore::crossview.api.RandomWeightsWarning")
SHIFT = 6  # px: the pair's disparity


def _pair() -> tuple[np.ndarray, np.ndarray]:
    """A textured left image and its right view at constant disparity SHIFT ``[H, W, 3]``."""
    return offset_pair(0, 192, 208, SHIFT, seed=0)


def _written_out(disparity: np.ndarray, error: np.ndarray, image: np.ndarray,
                 view: str) -> np.ndarray:
    """One view's self-fusion step by step: the consistent pixels, the farther of the nearest
    ones along the row elsewhere, the fusion's edge medians, the strip (the right view's along
    its right border: the left view's rule on the mirrored maps)."""
    checked = np.where(error <= SELF_FUSION_CHECK_PX, disparity, np.nan)
    if view == "right":
        return _written_out(disparity[:, ::-1], error[:, ::-1], image[:, ::-1], "left")[:, ::-1]
    filled = fill_holes(checked)
    for settings in sgbm_fusion.EDGE_MEDIANS:
        filled = edge_weighted_median(filled, image, **settings)
    return extend_out_of_view(filled, **sgbm_fusion.OUT_OF_VIEW)


def test_the_mirrored_swapped_pair_is_a_rectified_pair_of_the_same_disparity() -> None:
    left, right = (torch.from_numpy(v).permute(2, 0, 1)[None].float() for v in _pair())
    first, second = mirrored(right), mirrored(left)
    # the new left image's (x, y) is the new right image's (x - SHIFT, y)
    assert torch.equal(first[..., SHIFT:], second[..., :-SHIFT])


@pytest.mark.parametrize("as_tensor", [False, True])
def test_mirrored_fields_written_out_and_its_own_inverse(as_tensor: bool) -> None:
    b, h, w = 2, 3, 5
    field = np.random.default_rng(0).normal(size=(2 * b, h, w, 2)).astype(np.float32)
    given = torch.from_numpy(field) if as_tensor else field
    got = mirrored_fields(given)
    assert type(got) is type(given)
    for row in range(2 * b):
        source = (row + b) % (2 * b)  # the views swap
        for y in range(h):
            for x in range(w):
                fx, fy = field[source, y, w - 1 - x].tolist()
                assert got[row, y, x].tolist() == [-fx, fy]
    back = mirrored_fields(got)
    assert (back == given).all() and (given == field).all()  # the input is left as it was
    # a constant disparity d in both views (left x = -d, right x = +d) maps to itself
    constant = np.zeros((2, h, w, 2), np.float32)
    constant[0, ..., 0], constant[1, ..., 0] = -3.0, 3.0
    np.testing.assert_array_equal(mirrored_fields(constant), constant)


def test_the_runs_sizes_are_the_scales_of_the_pair_or_of_the_size_asked() -> None:
    assert SELF_FUSION_SCALES[0] == 1  # the pair's own run first
    for shape, size in (((375, 450), None), ((375, 450), (200, 240)), ((31, 47), None)):
        base = size or shape
        want = [size if s == 1 else (round(base[0] * s), round(base[1] * s))
                for s in SELF_FUSION_SCALES]
        assert self_fusion_sizes(shape, size) == want


@pytest.mark.parametrize("runs", [2, 4])
def test_best_matched_takes_per_pixel_the_run_whose_matches_cost_least(runs: int) -> None:
    rng = np.random.default_rng(1)
    images = [rng.integers(0, 256, (24, 32, 3), dtype=np.uint8) for _ in range(2)]
    codes = [census_codes(image) for image in images]
    fields = [rng.normal(0, 3, (2, 24, 32, 2)).astype(np.float32) for _ in range(runs)]
    got = best_matched(fields, codes)
    costs = [census_cost(codes, f, SELF_FUSION_CENSUS_WINDOW) for f in fields]
    for row in range(2):
        for y in range(24):
            for x in range(32):
                values = [float(c[row, y, x]) for c in costs]
                want = fields[values.index(min(values))]  # the first of equals
                np.testing.assert_array_equal(got[row, y, x], want[row, y, x])
    first = fields[0]
    np.testing.assert_array_equal(best_matched([first, first.copy()], codes), first)  # ties


def test_the_pair_is_fused_from_the_best_matched_run() -> None:
    rng = np.random.default_rng(2)
    h, w = 30, 64
    left = rng.integers(0, 256, (h, w, 3), dtype=np.uint8)
    images = [left, np.roll(left, -5, axis=1)]  # disparity 5
    field = np.zeros((2, h, w, 2), np.float32)
    field[0, ..., 0], field[1, ..., 0] = -5.0, 5.0  # right
    field[0, :, 20:36, 0] = -9.0  # a patch wrong in the pair's run ...
    field[1, :, 11:27, 0] = 9.0  # ... in both views, so that they agree there
    mirror = mirrored_fields(np.where(field == 9.0, 5.0, np.where(field == -9.0, -5.0, field)))
    larger = mirrored_fields(mirror)  # a run at another scale: wrong on another patch
    larger[0, :, 44:60, 0] = -1.0
    got = self_fused_pair(images, [field, larger], [mirror, mirrored_fields(larger)])
    runs = [field, mirrored_fields(mirror), larger, larger]
    chosen = best_matched(runs, [census_codes(image) for image in images])
    inner = (slice(None), slice(3, -3))  # rows away from the windows' reflected borders
    assert (chosen[0][inner][:, 27:29, 0] == -5.0).all()  # the patch's middle: the right run
    assert (chosen[0][inner][:, 51:53, 0] == -5.0).all()
    disparity = np.stack([-chosen[0, ..., 0], chosen[1, ..., 0]])
    np.testing.assert_array_equal(got, self_fused_disparities(
        images, disparity, consistency_error(torch.from_numpy(chosen))[0].numpy()))


@pytest.mark.parametrize("seed", range(3))
def test_each_view_is_the_steps_written_out(seed: int) -> None:
    rng = np.random.default_rng(seed)
    h, w = 40, 64
    smooth = np.cumsum(rng.uniform(-0.3, 0.3, (2, h, w)), axis=2) + 12
    step = np.where(np.arange(w) < w // 2, 0.0, 6.0)  # a depth edge for the medians
    disparity = (smooth + step).astype(np.float32)
    error = rng.uniform(0, 2.5, (2, h, w)).astype(np.float32)
    images = [rng.integers(0, 256, (h, w, 3), dtype=np.uint8) for _ in range(2)]
    fused = self_fused_disparities(images, disparity, error)
    assert fused.shape == (2, h, w) and fused.dtype == np.float32
    for row, view in enumerate(("left", "right")):
        want = _written_out(disparity[row], error[row], images[row], view)
        np.testing.assert_array_equal(fused[row], want.astype(np.float32))


def test_consistent_pixels_away_from_edges_and_borders_keep_the_networks_value() -> None:
    rng = np.random.default_rng(3)
    disparity = (8.0 + rng.uniform(0, 0.5, (2, 30, 60))).astype(np.float32)
    error = np.where(rng.random((2, 30, 60)) < 0.3, 5.0, 0.1).astype(np.float32)
    images = [rng.integers(0, 256, (30, 60, 3), dtype=np.uint8) for _ in range(2)]
    fused = self_fused_disparities(images, disparity, error)
    inside = (error <= SELF_FUSION_CHECK_PX)[:, :, 20:40]  # no strip, no depth edge here
    assert np.array_equal(fused[:, :, 20:40][inside], disparity[:, :, 20:40][inside])
    # every value the fill gives is one of the network's own values of that row
    for row in range(2):
        for y in range(30):
            assert set(fused[row, y, 20:40].tolist()) <= set(disparity[row, y].tolist())


def _runs(model: torch.nn.Module, left: np.ndarray, right: np.ndarray,
          start: torch.Tensor | None = None) -> tuple[list[torch.Tensor], list[torch.Tensor]]:
    """The network alone's fields on the pair and on the mirrored, swapped pair (``start``
    mirrored too) at each size of :func:`self_fusion_sizes`, each run by itself."""
    sizes = self_fusion_sizes(left.shape[:2])
    back = None if start is None else mirrored_fields(start)
    fields = [predict_fields(model, left, right, "stereo", fuse=False, size=size,
                             init=start).field for size in sizes]
    mirrors = [predict_fields(model, right[:, ::-1].copy(), left[:, ::-1].copy(), "stereo",
                              fuse=False, size=size, init=back).field for size in sizes]
    return fields, mirrors


def test_predict_fields_fuses_the_networks_views_instead_of_sgbm() -> None:
    left, right = _pair()
    torch.manual_seed(0)
    model = crossview.load_model("self-fusion-test")
    assert model.fuse_by_default
    fields, mirrors = _runs(model, left, right)
    selfed = predict_fields(model, left, right, "stereo", self_fuse=True)  # fuse: off then
    x0, x1 = (torch.from_numpy(v).permute(2, 0, 1)[None].float() for v in (left, right))
    plain = fields[0].numpy()
    runs = [run for field, mirror in zip(fields, mirrors, strict=True)
            for run in (field.numpy(), mirrored_fields(mirror.numpy()))]
    chosen = best_matched(runs, [census_codes(left), census_codes(right)])
    for k, run in enumerate(runs[1:], 1):  # every other run answers some pixels
        assert (chosen == run).all(-1).any(), k
    assert not np.array_equal(chosen, plain)
    want = fuse_with_itself(x0, x1, fields, mirrors)
    assert torch.equal(selfed.field, want)
    assert not torch.equal(selfed.field, fields[0])  # a random network: many inconsistent
    assert selfed.network_share is None
    np.testing.assert_array_equal(field_to_disparity(want[:1].numpy())[0],
                                  self_fused_pair([left, right], [f.numpy() for f in fields],
                                                  [m.numpy() for m in mirrors])[0])
    result = crossview.estimate_disparity(left, right, model=model, self_fuse=True)
    assert torch.equal(result.disparity[0], torch.from_numpy(field_to_disparity(
        want[:1].numpy())[0]))


def test_a_warm_start_starts_every_run_the_mirrored_ones_mirrored() -> None:
    left, right = _pair()
    torch.manual_seed(0)
    model = crossview.load_model("self-fusion-test")
    start = torch.zeros(2, 24, 26, 2)  # both views' fields at any size, as a stream gives
    start[0, ..., 0], start[1, ..., 0] = -SHIFT, SHIFT
    start[0, :, :8, 0] = -2.0  # not mirror symmetric
    x0, x1 = (torch.from_numpy(v).permute(2, 0, 1)[None].float() for v in (left, right))
    want = fuse_with_itself(x0, x1, *_runs(model, left, right, start))
    got = predict_fields(model, left, right, "stereo", self_fuse=True, init=start)
    assert torch.equal(got.field, want)


def test_a_network_adapted_to_the_pair_self_fuses_all_its_runs() -> None:
    left, right = _pair()
    torch.manual_seed(0)
    model = crossview.load_model("self-fusion-test")
    adapted = adapt_to_pair(model, left, right, "stereo", settings=AdaptationSettings(steps=1))
    x0, x1 = (torch.from_numpy(v).permute(2, 0, 1)[None].float() for v in (left, right))
    fields, mirrors = _runs(adapted, left, right)
    assert len(fields) == len(mirrors) == len(SELF_FUSION_SCALES)  # every run, as unadapted
    want = fuse_with_itself(x0, x1, fields, mirrors)
    assert torch.equal(predict_fields(adapted, left, right, "stereo", self_fuse=True).field,
                       want)


def test_self_fusion_refuses_flow_and_the_sgbm_fusion() -> None:
    left, right = _pair()
    model = crossview.load_model("self-fusion-test")
    with pytest.raises(UserError, match="leave fuse off"):
        predict_fields(model, left, right, "stereo", fuse=True, self_fuse=True)
    with pytest.raises(UserError, match="flow has no such option"):
        predict_fields(model, left, right, "flow", self_fuse=True)


def _run(args: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str]:
    code, _, err = run_cli(args, capsys)
    return code, err


def test_the_command_line_self_fuses_and_eval_scores_it(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    left, right = _pair()
    scene = tmp_path / "scenes" / "shifted"
    scene.mkdir(parents=True)
    for name, image in (("left.png", left), ("right.png", right)):
        Image.fromarray(image).save(scene / name)
    np.save(scene / "gt.npy", np.full(left.shape[:2], SHIFT, np.float32))
    torch.manual_seed(0)
    code, err = _run(["stereo", str(scene / "left.png"), str(scene / "right.png"), "-o",
                      str(tmp_path / "out"), "--model", "self-fusion-test", "--format", "npy",
                      "--self-fuse"], capsys)
    assert code == 0, err
    torch.manual_seed(0)
    model = crossview.load_model("self-fusion-test")
    expected = crossview.estimate_disparity(left, right, model=model, self_fuse=True)
    np.testing.assert_array_equal(io.read_npy(tmp_path / "out" / "left_disp.npy"),
                                  expected.disparity[0].numpy())
    for bad in (["--fuse"], ["--preset", "fast"]):
        code, err = _run(["stereo", str(scene / "left.png"), str(scene / "right.png"), "-o",
                          str(tmp_path / "bad"), "--model", "self-fusion-test", "--self-fuse",
                          *bad], capsys)
        assert code == 2 and "drop --fuse / --preset" in err and "Traceback" not in err
        assert not (tmp_path / "bad").exists()
    out = tmp_path / "eval.json"
    torch.manual_seed(0)  # the same random network in both evaluations
    code, err = _run(["eval", "--model", "self-fusion-test", "--dataset",
                      f"scenes:{tmp_path / 'scenes'}", "--json", str(out)], capsys)
    assert code == 0, err
    report = json.loads(out.read_text())
    names = [b["name"] for b in report["baselines"]]
    assert names[:2] == ["network alone", "network self-fused"]
    # scored as the model itself: the same numbers as its row beside the fused default
    torch.manual_seed(0)
    code, err = _run(["eval", "--model", "self-fusion-test", "--dataset",
                      f"scenes:{tmp_path / 'scenes'}", "--json", str(out), "--self-fuse"],
                     capsys)
    assert code == 0, err
    selfed = json.loads(out.read_text())
    assert selfed["self_fuse"] is True
    assert selfed["mean"] == report["baselines"][1]["mean"]
    code, err = _run(["eval", "--model", "self-fusion-test", "--dataset",
                      f"scenes:{tmp_path / 'scenes'}", "--self-fuse", "--fuse"], capsys)
    assert code == 2 and "drop --fuse" in err and "Traceback" not in err
