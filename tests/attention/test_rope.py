from __future__ import annotations

import math

import pytest
import torch

from crossview.attention.rope import (
    apply_rope,
    grid_positions,
    rope_coefficients,
    rope_frequencies,
)

F64 = torch.float64


def test_frequencies_follow_base_power_law() -> None:
    freqs = rope_frequencies(4, base=100.0)
    expected = torch.tensor([100 ** (-i / 4) for i in range(4)], dtype=F64)
    torch.testing.assert_close(freqs, expected)


def test_split_halves_pairs_channel_i_with_i_plus_n() -> None:
    n = 3
    x = torch.arange(1.0, 2 * n + 1, dtype=F64)  # [1..6]
    cos, sin = rope_coefficients(torch.tensor(2.0), n, base=100.0, dtype=F64)
    out = apply_rope(x, cos, sin)
    for i in range(n):
        angle = 2.0 * 100 ** (-i / n)
        c, s = math.cos(angle), math.sin(angle)
        assert math.isclose(out[i], c * x[i] + s * x[i + n], abs_tol=1e-12)
        assert math.isclose(out[i + n], -s * x[i] + c * x[i + n], abs_tol=1e-12)


def test_inverse_undoes_forward() -> None:
    gen = torch.Generator().manual_seed(0)
    x = torch.randn(2, 5, 8, generator=gen, dtype=F64)
    cos, sin = rope_coefficients(torch.arange(5), 4, dtype=F64)
    torch.testing.assert_close(apply_rope(apply_rope(x, cos, sin), cos, sin, inverse=True), x)


def test_scores_depend_only_on_position_difference() -> None:
    gen = torch.Generator().manual_seed(1)
    q, k = torch.randn(2, 16, generator=gen, dtype=F64)

    def score(pq: float, pk: float) -> torch.Tensor:
        cq, sq = rope_coefficients(torch.tensor(pq), 8, dtype=F64)
        ck, sk = rope_coefficients(torch.tensor(pk), 8, dtype=F64)
        return apply_rope(q, cq, sq) @ apply_rope(k, ck, sk)

    torch.testing.assert_close(score(3.0, 7.0), score(-2.0, 2.0))
    assert not torch.allclose(score(3.0, 7.0), score(3.0, 8.0))


def test_grid_positions_order_camera_row_column() -> None:
    positions = grid_positions((2, 3), cameras=2)
    one = [[0, 0], [1, 0], [2, 0], [0, 1], [1, 1], [2, 1]]
    assert positions.tolist() == one + one


def test_odd_channels_raise() -> None:
    with pytest.raises(ValueError, match="2n channels"):
        apply_rope(torch.zeros(5), torch.zeros(2), torch.zeros(2))
    with pytest.raises(ValueError, match="non-empty grid"):
        grid_positions((0, 3))
