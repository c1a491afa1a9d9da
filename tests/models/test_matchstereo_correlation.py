"""Initial correlation: volumes and regressions against explicit loops, and the golden volumes."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
from safetensors.torch import load_file

from crossview.models.matchstereo.correlation import (
    flow_volume,
    regress_flow,
    regress_stereo,
    stereo_volume,
)
from crossview.nn.encoder import ConvFormer

GOLDEN = Path(__file__).resolve().parents[3] / "shared" / "golden"


def naive_stereo_volume(scores: torch.Tensor) -> torch.Tensor:
    b, h, w, _ = scores.shape
    logits = torch.zeros(2 * b, w, h, w, dtype=scores.dtype)
    for d in range(w):
        for x in range(w):
            if x - d >= 0:
                logits[:b, d, :, x] = scores[:, :, x, x - d]
            if x + d < w:
                logits[b:, d, :, x] = scores[:, :, x + d, x]
    prob = logits.softmax(1)
    filled = prob.clone()
    for d in range(w):
        for x in range(w):
            if x < d:
                filled[:b, d, :, x] = prob[:b, d, :, d]
            if x >= w - 1 - d:
                filled[b:, d, :, x] = prob[b:, d, :, w - 1 - d]
    return filled


def naive_regress_stereo(volume: torch.Tensor) -> torch.Tensor:
    n, depth, h, w = volume.shape
    out = torch.zeros(n, h, w, 2, dtype=volume.dtype)
    for i in range(n):
        for y in range(h):
            for x in range(w):
                p = volume[i, :, y, x]
                box = [sum(p[j] for j in range(c - 2, c + 3) if 0 <= j < depth) / 5
                       for c in range(depth)]
                c = min(max(int(torch.stack(box).argmax()), 2), depth - 3)
                idx = torch.arange(c - 2, c + 3)
                q = p[idx] * (p[idx] >= 1 / depth)
                disp = (q * idx).sum() / q.sum().clamp(min=1e-6)
                out[i, y, x, 0] = -disp if i < n // 2 else disp
    return out


def naive_regress_flow(volume: torch.Tensor) -> torch.Tensor:
    n, h, w, hw = volume.shape
    matrix = volume.reshape(n, hw, hw)
    out = torch.zeros(n, h, w, 2, dtype=volume.dtype)
    for i in range(n):
        for qi in range(hw):
            box = torch.zeros(hw, dtype=volume.dtype)
            for t in range(hw):
                rows = range(max(qi - 2, 0), min(qi + 3, hw))
                cols = range(max(t - 2, 0), min(t + 3, hw))
                box[t] = sum(matrix[i, r, c] for r in rows for c in cols) / 25
            idx = int(box.argmax())
            cy = min(max(idx // w, 2), h - 3)
            cx = min(max(idx % w, 2), w - 3)
            total = sx = sy = 0.0
            for yy in range(cy - 2, cy + 3):
                for xx in range(cx - 2, cx + 3):
                    p = float(matrix[i, qi, yy * w + xx])
                    p = p if p >= 1 / hw else 0.0
                    total, sx, sy = total + p, sx + p * xx, sy + p * yy
            total = max(total, 1e-6)
            out[i, qi // w, qi % w] = torch.tensor([sx / total - qi % w, sy / total - qi // w])
    return out


def test_stereo_volume_matches_loops() -> None:
    torch.manual_seed(0)
    scores = torch.randn(2, 3, 7, 7, dtype=torch.float64)
    torch.testing.assert_close(stereo_volume(scores), naive_stereo_volume(scores))


def test_regress_stereo_matches_loops() -> None:
    torch.manual_seed(1)
    volume = (3 * torch.randn(4, 9, 2, 5, dtype=torch.float64)).softmax(1)
    torch.testing.assert_close(regress_stereo(volume), naive_regress_stereo(volume))


def test_regress_stereo_recovers_peaked_disparity() -> None:
    volume = torch.zeros(2, 12, 1, 12, dtype=torch.float64)
    volume[:, 6] = 0.6
    volume[:, 7] = 0.4
    field = regress_stereo(volume)
    torch.testing.assert_close(field[0, ..., 0], torch.full((1, 12), -6.4, dtype=torch.float64))
    torch.testing.assert_close(field[1, ..., 0], torch.full((1, 12), 6.4, dtype=torch.float64))
    assert field[..., 1].abs().max() == 0


def test_flow_regression_matches_loops() -> None:
    torch.manual_seed(2)
    h, w = 6, 7
    scores = 4 * torch.randn(1, h * w, h * w, dtype=torch.float64)
    volume = flow_volume(scores, (h, w))
    assert volume.shape == (2, h, w, h * w)
    torch.testing.assert_close(volume[1].reshape(h * w, -1),
                               scores[0].t().softmax(-1))
    torch.testing.assert_close(regress_flow(volume), naive_regress_flow(volume))


@pytest.mark.skipif(not (GOLDEN / "matchstereo_tiny_vectors.safetensors").exists(),
                    reason="golden vectors not available")
@pytest.mark.parametrize("task", ["stereo", "flow"])
def test_golden_initial_correlation(task: str) -> None:
    from crossview.models.matchstereo.correlation import InitCorrelation

    weights = load_file(GOLDEN / "matchstereo_tiny_random_weights.safetensors")
    golden = load_file(GOLDEN / "matchstereo_tiny_vectors.safetensors")
    encoder, corr = ConvFormer((32, 64, 128, 160)), InitCorrelation(160)
    encoder.load_state_dict({k[8:]: v for k, v in weights.items() if k.startswith("encoder.")})
    corr.load_state_dict({k[24:]: v for k, v in weights.items()
                          if k.startswith("init_correlation_volume.")})
    images = torch.cat([golden["stereo.left"], golden["stereo.right"]]) * (2 / 255) - 1
    with torch.no_grad():
        field, volume = corr(encoder(images)[3], task)
    torch.testing.assert_close(volume, golden[f"{task}.init_cv"], atol=1e-5, rtol=1e-4)
    ref = golden[f"{task}.init_flow"]
    assert ((field - ref).abs() <= 1e-3 + 1e-4 * ref.abs()).all()
