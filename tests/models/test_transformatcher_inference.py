from __future__ import annotations

import numpy as np
import pytest
import torch
from safetensors.torch import save_file

from crossview.errors import UserError
from crossview.eval import evaluate
from crossview.metrics import get_metrics
from crossview.metrics.keypoints import THRESHOLD_KINDS
from crossview.models.keypoints.inference import match_pair
from crossview.models.transformatcher.inference import (
    ImageFeatures,
    keypoint_predictor,
    load_transformatcher,
    transfer_keypoints,
)
from crossview.models.transformatcher.model import TransforMatcher, raw_argmax_coords
from crossview.viz import match_lines, warp_source_to_target


@pytest.fixture(scope="module")
def model() -> TransforMatcher:
    torch.manual_seed(0)
    return TransforMatcher(grid=4).eval()


def test_match_pair_shapes_and_frames(model: TransforMatcher) -> None:
    src, tgt = torch.rand(1, 3, 30, 50) * 255, torch.rand(1, 3, 44, 20) * 255
    points = torch.tensor([[0.0, 0.0], [49.0, 29.0], [10.0, 5.0]])
    transferred, flow, flow_back = match_pair(model, src, tgt, points)
    assert transferred.shape == (3, 2) and flow.shape == (2, 30, 50)
    assert flow_back.shape == (2, 44, 20)
    assert (transferred[:, 0] >= -0.5).all() and (transferred[:, 0] <= 19.5).all()
    assert (transferred[:, 1] >= -0.5).all() and (transferred[:, 1] <= 43.5).all()


def test_transfer_keypoints_is_match_pairs_forward_direction(model: TransforMatcher) -> None:
    torch.manual_seed(3)
    src, tgt = torch.rand(1, 3, 30, 50) * 255, torch.rand(1, 3, 44, 20) * 255
    points = torch.tensor([[0.0, 0.0], [49.0, 29.0], [10.0, 5.0], [31.5, 17.25]])
    with torch.no_grad():
        torch.testing.assert_close(transfer_keypoints(model, src, tgt, points),
                                   match_pair(model, src, tgt, points)[0], atol=1e-4, rtol=0)
        raw = transfer_keypoints(model, src, tgt, points, "raw")
        square = [torch.nn.functional.interpolate(x, size=(64, 64), mode="bilinear",
                                                  antialias=True) for x in (src, tgt)]
        coords = raw_argmax_coords(model.correlation(*square), model.upsample)
    kp = (2 * points + 1) / torch.tensor([50.0, 30.0]) - 1
    expected = (model.transfer(coords, kp[None], 0.05)[0] + 1) * torch.tensor([20.0, 44.0])
    torch.testing.assert_close(raw, (expected - 1) / 2, atol=1e-4, rtol=0)
    with pytest.raises(ValueError, match="method must be one of"):
        transfer_keypoints(model, src, tgt, points, "soft")
    with pytest.raises(ValueError, match="variant must be None or one of"):
        keypoint_predictor(model, variant="refined-twice")


def test_image_features_run_the_backbones_once_per_distinct_image(
        model: TransforMatcher, monkeypatch: pytest.MonkeyPatch) -> None:
    calls = []
    features = model.features
    monkeypatch.setattr(model, "features", lambda x: calls.append(1) or features(x))
    kept = ImageFeatures(model, capacity=2)
    gen = torch.Generator().manual_seed(5)
    a, b, c = (torch.rand(1, 3, 30, 40, generator=gen) * 255 for _ in range(3))
    points = torch.tensor([[3.0, 4.0], [20.0, 11.5]])
    with torch.no_grad():
        for src, tgt in ((a, b), (b, a), (a.clone(), b)):
            torch.testing.assert_close(transfer_keypoints(model, src, tgt, points, features=kept),
                                       transfer_keypoints(model, src, tgt, points),
                                       atol=1e-5, rtol=0)
        assert len(calls) == 2 + 3  # a and b once; the three uncached runs once each
        # kept [a, b] -> c pushes a out, a then pushes b out: two runs; b again: one more
        transfer_keypoints(model, c, a, points, features=kept)
        transfer_keypoints(model, b, a, points, features=kept)
    assert len(calls) == 5 + 3


def test_keypoint_predictor_runs_inside_crossview_eval(model: TransforMatcher) -> None:
    assert "bbox-kp" in THRESHOLD_KINDS  # importing metrics.keypoints registers pck@...
    rng = np.random.default_rng(0)
    samples = [{"name": f"p{i}", "image0": rng.integers(0, 256, (30, 40, 3), dtype=np.uint8),
                "image1": rng.integers(0, 256, (36, 30, 3), dtype=np.uint8),
                "keypoints0": rng.uniform(0, 29, (5, 2)).astype(np.float32),
                "keypoints1": rng.uniform(0, 29, (5, 2)).astype(np.float32),
                "valid_keypoints": np.array([True] * 4 + [False])} for i in range(2)]
    result = evaluate(samples, keypoint_predictor(model),
                      get_metrics("semantic", ["pck@0.1_img", "pck@0.1_bbox-kp"]),
                      reduction="image_mean")
    assert len(result.rows) == 2
    assert all(0.0 <= v <= 100.0 for v in result.mean().values())
    raw = keypoint_predictor(model, variant="raw")(samples[0])
    src, tgt = (torch.from_numpy(samples[0][k]).permute(2, 0, 1)[None].float()
                for k in ("image0", "image1"))
    with torch.no_grad():
        expected = transfer_keypoints(model, src, tgt, torch.from_numpy(samples[0]["keypoints0"]),
                                      "raw")
    np.testing.assert_allclose(raw, expected.numpy(), atol=1e-5)


def test_load_weights_and_errors(tmp_path) -> None:
    torch.manual_seed(1)
    reference = TransforMatcher()
    path = tmp_path / "w.safetensors"
    save_file(reference.head_state_dict(), str(path))
    loaded = load_transformatcher(path)
    torch.testing.assert_close(loaded.refiner.embed.weight, reference.refiner.embed.weight)
    save_file({"x": torch.zeros(1)}, str(tmp_path / "bad.safetensors"))
    with pytest.raises(UserError, match="not TransforMatcher weights"):
        load_transformatcher(tmp_path / "bad.safetensors")
    with pytest.raises(UserError, match="no such weights file"):
        load_transformatcher(tmp_path / "none.safetensors")


def test_drawing_and_warping() -> None:
    rng = np.random.default_rng(0)
    src = rng.integers(0, 256, (20, 30, 3), dtype=np.uint8)
    tgt = rng.integers(0, 256, (10, 12, 3), dtype=np.uint8)
    picture = match_lines(src, tgt, np.array([[1.0, 2.0]]), np.array([[5.0, 5.0]]))
    assert picture.shape == (20, 30 + 24, 3)
    np.testing.assert_array_equal(picture[15:, 20:25], src[15:, 20:25])  # away from the line
    # Zero flow between equal sizes reproduces the image exactly.
    same = warp_source_to_target(src, torch.zeros(2, 20, 30))
    np.testing.assert_array_equal(same, src)
    shifted = warp_source_to_target(src, torch.ones(2, 20, 30))
    np.testing.assert_array_equal(shifted[:-1, :-1], src[1:, 1:])
