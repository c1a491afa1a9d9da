"""Stereo pairs whose rows are offset (crossview.models.dense.vertical_alignment and the fused
run that lines them up): the offset measured, rows moved as the formula says, and a fusing run
of an offset pair that gives the rectified pair's disparities, its matches' y and the right
view back in the right image's rows; pairs below the threshold run as before; an offset
measured once and given back (a stream of one rig) is not measured again and gives the same
answer, at the working size too."""

from __future__ import annotations

import logging

import numpy as np
import pytest
import torch

import crossview
from crossview.errors import UserError
from crossview.geometry.disparity import field_to_disparity
from crossview.models.dense import inference
from crossview.models.dense.inference import predict_fields
from crossview.models.dense.vertical_alignment import measure_rows, rows_shifted
from crossview.models.matchstereo.specs import matchstereo_spec
from crossview.models.registry import FusedNetwork, register_model
from offset_pairs import offset_pair
from small_networks import SMALL

register_model(matchstereo_spec("alignment-test", SMALL, "stereo", fuse=True,
                                fused_network=FusedNetwork(align_px=0.5)), replace=True)
pytestmark = pytest.mark.filterwarnings("ignore::crossview.api.RandomWeightsWarning")
DISPARITY = 6  # px


def _pair(offset: int, h: int = 192, w: int = 224) -> tuple[np.ndarray, np.ndarray]:
    """A textured ``h x w`` pair at ``DISPARITY``, the right image's rows ``offset`` px down
    from the left's: left ``(x, y)`` is right ``(x - DISPARITY, y + offset)``."""
    return offset_pair(offset, h, w, DISPARITY, seed=3)


@pytest.mark.parametrize("offset", [-3, 0, 2])
def test_the_offset_is_measured(offset: int) -> None:
    left, right = _pair(offset)
    assert measure_rows(left, right).offset == pytest.approx(offset, abs=0.15)


def test_rows_move_as_the_formula_says() -> None:
    x = np.random.default_rng(0).random((2, 3, 7, 5), dtype=np.float32)
    out = rows_shifted(x, np.array([2.0, -1.25]))
    assert out.dtype == np.float32
    # first pair: row y reads row y + 2, the last row repeated below the image
    np.testing.assert_allclose(out[0, :, :5], x[0, :, 2:], atol=1e-6)
    np.testing.assert_allclose(out[0, :, 5:], np.broadcast_to(x[0, :, 6:], (3, 2, 5)), atol=1e-6)
    # second: row y reads 3/4 of row y - 1 and 1/4 of row y - 2
    np.testing.assert_allclose(out[1, :, 2:], 0.75 * x[1, :, 1:-1] + 0.25 * x[1, :, :-2],
                               atol=1e-6)
    np.testing.assert_allclose(out[1, :, 0], x[1, :, 0], atol=1e-6)
    assert np.array_equal(rows_shifted(x, np.zeros(2)), x)
    with pytest.raises(ValueError, match="one offset per image"):
        rows_shifted(x, np.zeros(3))


def test_an_offset_pair_runs_lined_up(caplog: pytest.LogCaptureFixture) -> None:
    torch.manual_seed(0)
    model = crossview.load_model("alignment-test")
    with caplog.at_level(logging.INFO, logger="crossview"):
        rectified = predict_fields(model, *_pair(0), "stereo")
        assert not caplog.records  # a rectified pair says nothing
        offset = predict_fields(model, *_pair(3), "stereo")
    assert [r.getMessage()[:50] for r in caplog.records] == [
        "the right image's rows lie 3.0 px below the left's"]
    # 3 px is more than a rig's rectification leaves: the note points to crossview rectify
    assert caplog.records[0].getMessage().endswith("rectify them first (`crossview stereo "
                                                   "--rectify`)")
    disparity = field_to_disparity(offset.field[:1])[0][16:-16, 16:-16]
    assert ((disparity - DISPARITY).abs() < 0.5).float().mean() > 0.95
    # the left view's matches lie 3 rows down; the right view's 3 rows up, in its own rows
    assert offset.field[0, ..., 1].mean().item() == pytest.approx(3, abs=0.15)
    assert offset.field[1, ..., 1].mean().item() == pytest.approx(-3, abs=0.15)
    right = field_to_disparity(offset.field[1:], "right")[0][16:-16, 16:-16]
    assert ((right - DISPARITY).abs() < 0.5).float().mean() > 0.95
    assert offset.valid[:, 16:-16, 16:-16].float().mean() > 0.95
    # without the lining up SGBM loses the rows
    model.fused_network = FusedNetwork()
    unaligned = field_to_disparity(predict_fields(model, *_pair(3), "stereo").field[:1])[0]
    assert ((unaligned[16:-16, 16:-16] - DISPARITY).abs() < 0.5).float().mean() < 0.8
    assert torch.equal(rectified.field, predict_fields(model, *_pair(0), "stereo").field)


def test_an_offset_below_the_threshold_or_without_the_fusion_changes_nothing() -> None:
    torch.manual_seed(0)
    model = crossview.load_model("alignment-test")
    left, right = _pair(0)
    lined = predict_fields(model, left, right, "stereo")
    model.fused_network = FusedNetwork()
    assert torch.equal(lined.field, predict_fields(model, left, right, "stereo").field)
    model.fused_network = FusedNetwork(align_px=0.5)
    shifted = _pair(2)
    alone = predict_fields(model, *shifted, "stereo", fuse=False)
    model.fused_network = FusedNetwork()
    assert torch.equal(alone.field, predict_fields(model, *shifted, "stereo", fuse=False).field)
    with pytest.raises(ValueError, match="align_px"):
        FusedNetwork(align_px=-1.0)


def _unmeasurable(monkeypatch: pytest.MonkeyPatch) -> None:
    def refuse(*args: object, **kwargs: object) -> None:
        raise AssertionError("the offset was measured again")

    monkeypatch.setattr(inference, "measure_rows", refuse)


@pytest.mark.parametrize("max_pixels", [None, 192 * 224 // 4])
def test_a_measured_offset_given_back_is_not_measured_again(
        max_pixels: int | None, monkeypatch: pytest.MonkeyPatch,
        caplog: pytest.LogCaptureFixture) -> None:
    """``row_offset`` (px at the pair's size) of a run, given to the next run of a pair from the
    same rig, lines it up without measuring (no note either) and gives the same fields; with
    ``max_pixels`` the pair runs at half its size and the offset is converted both ways."""
    torch.manual_seed(0)
    model = crossview.load_model("alignment-test")
    model.fused_network = FusedNetwork(align_px=0.5, max_pixels=max_pixels)
    pair = _pair(4, 384, 448) if max_pixels else _pair(4)
    measured = predict_fields(model, *pair, "stereo")
    assert measured.row_offset is not None and measured.row_offset.shape == (1,)
    assert measured.row_offset.item() == pytest.approx(4, abs=0.15)
    _unmeasurable(monkeypatch)
    caplog.clear()  # the measuring run's note
    with caplog.at_level(logging.INFO, logger="crossview"):
        reused = predict_fields(model, *pair, "stereo", row_offset=measured.row_offset)
    assert not caplog.records
    torch.testing.assert_close(reused.field, measured.field, rtol=0, atol=1e-4)
    torch.testing.assert_close(reused.row_offset, measured.row_offset)
    # a rectified rig's 0 lines nothing up: the fields of the pair as it is
    rectified = predict_fields(model, *pair, "stereo", row_offset=torch.zeros(1))
    assert rectified.row_offset.tolist() == [0.0]
    model.fused_network = FusedNetwork(max_pixels=max_pixels)
    assert torch.equal(rectified.field, predict_fields(model, *pair, "stereo").field)


def test_a_given_offset_is_refused_where_it_cannot_be_used() -> None:
    torch.manual_seed(0)
    model = crossview.load_model("alignment-test")
    left, right = _pair(0)
    assert predict_fields(model, left, right, "stereo", fuse=False).row_offset is None
    with pytest.raises(UserError, match="row_offset lines up the rows of a fused stereo run"):
        predict_fields(model, left, right, "stereo", fuse=False, row_offset=torch.zeros(1))
    with pytest.raises(UserError, match="row_offset holds 2 offsets for 1 pair"):
        predict_fields(model, left, right, "stereo", row_offset=torch.zeros(2))


def test_a_sequence_measures_the_rows_every_so_many_pairs_and_on_a_new_size(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """:class:`crossview.api.StereoSequence`: measured on pairs 0, 3, 6 with ``rows_every=3``,
    and again on the pair of another size; every pair lined up by the rig's 2 px."""
    calls: list[tuple[int, ...]] = []
    measure = inference.measure_rows

    def counted(left: np.ndarray, right: np.ndarray, **kwargs: object) -> object:
        calls.append(left.shape)
        return measure(left, right, **kwargs)

    monkeypatch.setattr(inference, "measure_rows", counted)
    torch.manual_seed(0)
    model = crossview.load_model("alignment-test")
    sequence = crossview.api.StereoSequence(rows_every=3)
    pairs = [_pair(2)] * 7 + [_pair(2, 224, 224)]
    results = [sequence.estimate(left, right, model=model) for left, right in pairs]
    assert calls == [(192, 224, 3)] * 3 + [(224, 224, 3)]
    assert all(r.row_offset.item() == pytest.approx(2, abs=0.15) for r in results)
    for bad in (0, -1, 1.5, True):
        with pytest.raises(UserError, match="rows_every must be a number of pairs"):
            crossview.api.StereoSequence(rows_every=bad)
    with pytest.raises(TypeError, match="sets row_offset itself"):
        sequence.estimate(*pairs[0], model=model, row_offset=0.0)
