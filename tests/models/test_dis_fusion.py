"""The DIS fusion of optical flow (crossview.models.dense.dis_fusion): the rule pixel by pixel
against the candidates' forward-backward errors and census costs, a consistent but wrong
network field giving way to DIS, then each direction's edge medians and variational
refinement; the refinement on its own; a batch fused pair by pair; the fusion as the default of
the bundled flow model through the api, and what an ONNX export says it leaves out."""

from __future__ import annotations

import cv2
import numpy as np
import pytest
import torch
from PIL import Image

import crossview
from crossview.export.modules import DenseOutputs
from crossview.export.onnx import dropped_defaults
from crossview.geometry.census_arrays import census_codes, census_cost
from crossview.geometry.consistency import consistency_error
from crossview.geometry.edge_weighted_median import edge_weighted_median_flow
from crossview.models.dense import dis_fusion
from crossview.models.dense.classical import dis_flow, grey_image, variational_refinement
from crossview.models.dense.dis_fusion import (
    DIS_FROM_CHOICE,
    FLOW_CENSUS_WINDOW,
    FLOW_DIS_RUNS,
    FLOW_EDGE_MEDIANS,
    FLOW_SECOND_TIER_PX,
    FLOW_VARIATIONAL,
    FUSION_DIS_FB_PX,
    fuse_with_dis,
)
from crossview.models.dense.inference import predict_fields
from crossview.models.dense.rank_transform import rank_transform
from crossview.models.matchstereo.specs import matchstereo_spec
from crossview.models.registry import FusedNetwork, register_model
from small_networks import SMALL

register_model(matchstereo_spec("fusion-test-flow", SMALL, "flow", fuse=True), replace=True)
pytestmark = pytest.mark.filterwarnings("ignore::crossview.api.RandomWeightsWarning")
SHIFT = (5, -3)  # px: frame 1 is frame 0 moved by this flow (u, v)


def _frames(h: int = 192, w: int = 208, *, shift: tuple[int, int] = SHIFT, pad: int = 8,
            cell: int = 4) -> tuple[np.ndarray, np.ndarray]:
    """A frame textured with ``cell`` px grains and the same scene moved by ``shift`` ``[H, W,
    3]`` uint8 (``pad`` px of the scene around the frame: at least the motion)."""
    rng = np.random.default_rng(0)
    coarse = rng.integers(0, 256, ((h + 2 * pad) // cell, (w + 2 * pad) // cell, 3),
                          dtype=np.uint8)
    wide = np.asarray(Image.fromarray(coarse).resize((w + 2 * pad, h + 2 * pad), Image.BICUBIC))
    u, v = shift
    frame0 = wide[pad:pad + h, pad:pad + w]
    frame1 = wide[pad - v:pad - v + h, pad - u:pad - u + w]  # frame1(p + (u, v)) = frame0(p)
    return np.ascontiguousarray(frame0), np.ascontiguousarray(frame1)


def _tensors(*frames: np.ndarray) -> list[torch.Tensor]:
    return [torch.from_numpy(f).permute(2, 0, 1)[None].float() for f in frames]


def _choice_by_loops(candidates: list[np.ndarray], codes: list[np.ndarray]) -> np.ndarray:
    """The rule pixel by pixel: among the candidates ``[2, H, W, 2]`` whose own forward-backward
    error is at most the threshold, the first with the lowest census cost; where none is, the
    same within the second tier; the first candidate (the network) where none is."""
    errors = [consistency_error(torch.from_numpy(c))[0].numpy() for c in candidates]
    costs = [census_cost(codes, c, FLOW_CENSUS_WINDOW, vertical=True) for c in candidates]
    chosen = np.empty_like(candidates[0])
    for row, y, x in np.ndindex(*chosen.shape[:3]):
        best = 0
        for tier in (FUSION_DIS_FB_PX, FLOW_SECOND_TIER_PX):
            within = [(cost[row, y, x], index) for index, (error, cost)
                      in enumerate(zip(errors, costs, strict=True)) if error[row, y, x] <= tier]
            if within:
                best = min(within)[1]  # the lowest cost, the earlier on ties
                break
        chosen[row, y, x] = candidates[best][row, y, x]
    return chosen


def test_the_second_tier_decides_only_where_nothing_is_consistent_within_the_first() -> None:
    """Three candidates on four pixels: consistent within 0.5 px (the first tier), within 2 px
    only, or not at all; the first tier wins where it holds any, the network where neither
    does."""
    assert (FUSION_DIS_FB_PX, FLOW_SECOND_TIER_PX) == (0.5, 2.0)
    candidates = [np.full((1, 1, 4, 2), value, np.float32) for value in (0.0, 1.0, 2.0)]
    costs = [np.array([[[5.0, 5.0, 5.0, 5.0]]]), np.array([[[1.0, 1.0, 1.0, 1.0]]]),
             np.array([[[3.0, 3.0, 3.0, 3.0]]])]
    errors = [np.array([[[0.2, 1.5, 3.0, 3.0]]]),  # the network
              np.array([[[1.0, 3.0, 3.0, 3.0]]]),  # lowest cost, within the second tier only
              np.array([[[0.4, 1.9, 2.5, 9.0]]])]
    chosen = dis_fusion._chosen(candidates, list(zip(costs, errors, strict=True)),
                                (FUSION_DIS_FB_PX, FLOW_SECOND_TIER_PX))
    # pixel 0: both the network and the third are within 0.5 px, the third costs less;
    # pixel 1: none within 0.5, within 2 the network and the third; pixels 2, 3: the network
    assert chosen[0, 0, :, 0].tolist() == [2.0, 2.0, 0.0, 0.0]
    one_tier = dis_fusion._chosen(candidates, list(zip(costs, errors, strict=True)),
                                  (FUSION_DIS_FB_PX,))
    assert one_tier[0, 0, :, 0].tolist() == [2.0, 0.0, 0.0, 0.0]


@pytest.mark.parametrize("runs", ["shipped", "grey only"])
@pytest.mark.parametrize("seed", range(2))
def test_the_rule_pixel_by_pixel(seed: int, runs: str, monkeypatch: pytest.MonkeyPatch) -> None:
    frame0, frame1 = _frames(64, 80)
    rng = np.random.default_rng(seed)
    field = torch.from_numpy(rng.normal(0, 2, (2, 64, 80, 2))).float()
    field[0, ..., 0] += SHIFT[0]
    field[0, ..., 1] += SHIFT[1]
    field[1, ..., 0] -= SHIFT[0]
    field[1, ..., 1] -= SHIFT[1]
    field[:, 20:40, 30:50] = torch.tensor(SHIFT, dtype=torch.float32) * torch.tensor(
        [1.0, -1.0])[:, None, None, None]  # a consistent patch: the census decides there
    candidates = [field.numpy(), np.stack([dis_flow(frame0, frame1), dis_flow(frame1, frame0)])]
    codes = [census_codes(frame0), census_codes(frame1)]
    if runs == "shipped":  # DIS on the grey frames, on their rank transforms of radius 2, and
        # on the grey frames started from the choice among the three before it
        assert FLOW_DIS_RUNS == (None, 2, DIS_FROM_CHOICE)
        rank0, rank1 = (rank_transform(cv2.cvtColor(f, cv2.COLOR_RGB2GRAY), 2)
                        for f in (frame0, frame1))
        candidates.append(np.stack([dis_flow(rank0, rank1), dis_flow(rank1, rank0)]))
        start = _choice_by_loops(candidates, codes)
        candidates.append(np.stack([dis_flow(frame0, frame1, start[0]),
                                    dis_flow(frame1, frame0, start[1])]))
    else:
        monkeypatch.setattr(dis_fusion, "FLOW_DIS_RUNS", (None,))
    fused = fuse_with_dis(*_tensors(frame0, frame1), field)
    expected = _choice_by_loops(candidates, codes)
    # then each direction's edge medians and variational refinement
    for row, (first, second) in enumerate(((frame0, frame1), (frame1, frame0))):
        for settings in FLOW_EDGE_MEDIANS:
            expected[row] = edge_weighted_median_flow(expected[row], first, **settings)
        expected[row] = variational_refinement(expected[row], first, second, **FLOW_VARIATIONAL)
    np.testing.assert_array_equal(fused.numpy(), expected)
    assert fused.dtype == field.dtype and fused.shape == field.shape


def test_dis_takes_grey_frames_as_they_are() -> None:
    """The rank run hands DIS grey frames; RGB frames are made grey first with OpenCV's
    weights, so both give one flow."""
    frame0, frame1 = _frames(64, 80)
    grey0, grey1 = (cv2.cvtColor(f, cv2.COLOR_RGB2GRAY) for f in (frame0, frame1))
    assert grey_image(grey0) is grey0
    np.testing.assert_array_equal(dis_flow(grey0, grey1), dis_flow(frame0, frame1))


def test_dis_started_near_a_large_motion_finds_it() -> None:
    """A 40 px translation of a fine texture: DIS from zero loses it; started from a flow 1.5 px
    off, it finds it everywhere the match is in view (the start is left as it was)."""
    shift = np.array([40.0, 0.0], np.float32)
    frame0, frame1 = _frames(192, 208, shift=(40, 0), pad=48, cell=2)
    start = np.broadcast_to(shift + 1.5, (192, 208, 2)).copy()
    before = start.copy()

    def found(flow: np.ndarray) -> float:
        """The share of the pixels whose match is in view that are within 0.5 px."""
        return float((np.linalg.norm(flow - shift, axis=-1)[16:-16, 16:-56] < 0.5).mean())

    assert found(dis_flow(frame0, frame1)) < 0.1
    assert found(dis_flow(frame0, frame1, start)) > 0.95
    np.testing.assert_array_equal(start, before)


def test_the_variational_refinement_pulls_a_noisy_flow_to_the_motion() -> None:
    """A translation's flow with 0.6 px of noise comes back close to the translation (the
    smoothness and the data terms together); the input is left as it was."""
    frame0, frame1 = _frames()
    rng = np.random.default_rng(2)
    truth = np.broadcast_to(np.array(SHIFT, np.float32), (192, 208, 2))
    noisy = (truth + rng.normal(0, 0.6, truth.shape)).astype(np.float32)
    before = noisy.copy()
    refined = variational_refinement(noisy, frame0, frame1, **FLOW_VARIATIONAL)
    np.testing.assert_array_equal(noisy, before)
    assert refined.shape == (192, 208, 2) and refined.dtype == np.float32

    def error(flow: np.ndarray) -> float:
        return float(np.linalg.norm(flow - truth, axis=-1)[16:-16, 16:-16].mean())

    assert error(noisy) > 0.6 and error(refined) < 0.25 * error(noisy)


def test_each_pair_of_a_batch_is_fused_as_alone() -> None:
    frame0, frame1 = _frames(64, 80)
    other0, other1 = np.ascontiguousarray(frame1[::-1]), np.ascontiguousarray(frame0[::-1])
    rng = np.random.default_rng(5)
    fields = torch.from_numpy(rng.normal(0, 3, (4, 64, 80, 2))).float()  # f0, f1, b0, b1
    x0, x1 = (torch.cat(t) for t in zip(_tensors(frame0, frame1), _tensors(other0, other1),
                                          strict=True))
    batch = fuse_with_dis(x0, x1, fields)
    first = fuse_with_dis(*_tensors(frame0, frame1), fields[[0, 2]])
    second = fuse_with_dis(*_tensors(other0, other1), fields[[1, 3]])
    assert torch.equal(batch[[0, 2]], first) and torch.equal(batch[[1, 3]], second)


def test_a_bad_network_field_gives_way_to_dis_on_a_translation() -> None:
    frame0, frame1 = _frames()
    field = torch.zeros(2, 192, 208, 2)  # the network says: nothing moved (consistent!)
    field[0, :, :, 0] = torch.linspace(-20, 20, 208)  # and now it is not
    fused = fuse_with_dis(*_tensors(frame0, frame1), field)
    interior = fused[0, 16:-16, 16:-16]
    error = (interior - torch.tensor(SHIFT, dtype=torch.float32)).norm(dim=-1)
    assert (error < 0.5).float().mean() > 0.9
    with pytest.raises(ValueError, match=r"\[2B, H, W, 2\]"):
        fuse_with_dis(*_tensors(frame0, frame1), field[:1])
    with pytest.raises(ValueError, match="'network'"):
        fuse_with_dis(*_tensors(frame0, frame1), field, runs=(None, "network"))


def test_a_consistent_but_wrong_network_field_gives_way_to_dis_s_better_matches() -> None:
    """The network says 6 px further than the frames moved, in both directions alike, so its
    forward-backward check passes everywhere; DIS's matches look alike and the network's do not,
    so the census takes DIS's (the forward-backward rule before it kept the network's)."""
    frame0, frame1 = _frames()
    wrong = torch.tensor([SHIFT[0] + 6.0, float(SHIFT[1])])
    field = torch.stack([wrong.expand(192, 208, 2), -wrong.expand(192, 208, 2)])
    fused = fuse_with_dis(*_tensors(frame0, frame1), field)
    error = (fused[0, 16:-16, 16:-16] - torch.tensor(SHIFT, dtype=torch.float32)).norm(dim=-1)
    assert (error < 0.5).float().mean() > 0.9


def test_a_large_motion_the_network_nearly_has_is_made_exact_by_dis_started_from_it() -> None:
    """A 40 px translation that DIS from zero loses; the network says 1.5 px too far (both
    directions alike), so the choice before the last run is the network's. Without the run
    started from that choice the fusion keeps the network's error (the refinement does not
    pull it back); with it, every pixel whose match is in view is within 0.5 px."""
    shift = torch.tensor([40.0, 0.0])
    frame0, frame1 = _frames(192, 208, shift=(40, 0), pad=48, cell=2)
    wrong = shift + 1.5
    field = torch.stack([wrong.expand(192, 208, 2), -wrong.expand(192, 208, 2)])

    def found(runs: tuple | None) -> float:
        fused = fuse_with_dis(*_tensors(frame0, frame1), field, runs=runs)
        return float(((fused[0, 16:-16, 16:-56] - shift).norm(dim=-1) < 0.5).float().mean())

    assert found(FLOW_DIS_RUNS[:2]) < 0.1
    assert found(None) > 0.99


def test_predict_fields_fuses_flow_after_the_network_by_the_models_default() -> None:
    frame0, frame1 = _frames()
    torch.manual_seed(0)
    model = crossview.load_model("fusion-test-flow")
    assert model.fuse_by_default
    plain = predict_fields(model, frame0, frame1, "flow", fuse=False)
    default = predict_fields(model, frame0, frame1, "flow")
    fused = fuse_with_dis(*_tensors(frame0, frame1), plain.field)
    assert torch.equal(default.field, fused)
    assert not torch.equal(default.field, plain.field)
    result = crossview.estimate_flow(frame0, frame1, model=model, fuse=False)
    assert torch.equal(result.flow, plain.field[:1].permute(0, 3, 1, 2))


def test_the_bundled_flow_model_fuses_and_its_export_says_it_leaves_dis_out() -> None:
    model = crossview.load_model("matchflow-hybrid")
    assert model.fuse_by_default  # a large pair runs whole at 0.5 MP, as itself below
    assert model.fused_network == FusedNetwork(1.0, lri=True, refine=True, max_pixels=500_000,
                                               classical_runs=3, median_passes=(0, 1))
    module = DenseOutputs(model, lri=True, refine=True)
    assert ("--no-fuse", "DIS fusion") in dropped_defaults(module)
