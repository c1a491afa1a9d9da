from __future__ import annotations

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from crossview.attention.rope4d import apply_rope4d, match_positions, rope4d_angles


def _score(q: torch.Tensor, k: torch.Tensor, p: torch.Tensor, p2: torch.Tensor) -> torch.Tensor:
    """<rope(q, p), rope(k, p2)> for single vectors q, k [D] and positions [4]."""
    dim = q.shape[-1]
    rq = apply_rope4d(q[None], rope4d_angles(p[None], dim))
    rk = apply_rope4d(k[None], rope4d_angles(p2[None], dim))
    return (rq * rk).sum()


coords = st.lists(st.integers(-20, 20), min_size=4, max_size=4)


@settings(max_examples=25, deadline=None)
@given(p=coords, p2=coords, shift=coords, seed=st.integers(0, 2**16))
def test_query_key_score_depends_only_on_the_4d_offset(p, p2, shift, seed) -> None:
    gen = torch.Generator().manual_seed(seed)
    q, k = torch.randn(2, 16, generator=gen, dtype=torch.float64)
    p, p2, shift = (torch.tensor(v, dtype=torch.float64) for v in (p, p2, shift))
    torch.testing.assert_close(_score(q, k, p + shift, p2 + shift), _score(q, k, p, p2))


def test_score_matches_the_complex_number_formula() -> None:
    # Pair j of axis j % 4 at frequency base**(-(j//4)/(D/8)): q.k rotated by the offset angle.
    gen = torch.Generator().manual_seed(0)
    dim, base = 16, 100.0
    q, k = torch.randn(2, dim, generator=gen, dtype=torch.float64)
    p = torch.tensor([3.0, -1.0, 7.0, 2.0], dtype=torch.float64)
    p2 = torch.tensor([0.0, 4.0, 1.0, 5.0], dtype=torch.float64)
    expected = torch.zeros((), dtype=torch.float64)
    for j in range(dim // 2):
        theta = base ** (-(j // 4) / (dim // 8)) * (p[j % 4] - p2[j % 4])
        qc, kc = complex(q[2 * j], q[2 * j + 1]), complex(k[2 * j], k[2 * j + 1])
        expected += (qc * kc.conjugate() * complex(torch.cos(theta), torch.sin(theta))).real
    torch.testing.assert_close(_score(q, k, p, p2), expected)


@pytest.mark.parametrize("axis", range(4))
def test_every_axis_changes_the_score(axis: int) -> None:
    gen = torch.Generator().manual_seed(1)
    q, k = torch.randn(2, 32, generator=gen, dtype=torch.float64)
    p = torch.zeros(4, dtype=torch.float64)
    moved = p.clone()
    moved[axis] = 1.0
    assert not torch.isclose(_score(q, k, moved, p), _score(q, k, p, p))


def test_rotation_preserves_norm_and_zero_position_is_identity() -> None:
    x = torch.randn(2, 3, 81, 16, dtype=torch.float64)
    angles = rope4d_angles(match_positions(3, 3, 3, 3, dtype=torch.float64), 16)
    torch.testing.assert_close(apply_rope4d(x, angles).norm(dim=-1), x.norm(dim=-1))
    torch.testing.assert_close(apply_rope4d(x, torch.zeros(81, 8, dtype=torch.float64)), x)


def test_match_positions_follow_row_major_correlation_order() -> None:
    pos = match_positions(2, 3, 4, 5)
    corr_index = torch.arange(2 * 3 * 4 * 5).reshape(2, 3, 4, 5)
    i = 77
    assert (corr_index == i).nonzero()[0].tolist() == pos[i].long().tolist()


def test_bad_shapes_are_named() -> None:
    with pytest.raises(ValueError, match="divisible by 8"):
        rope4d_angles(torch.zeros(5, 4), 12)
    with pytest.raises(ValueError, match="positions"):
        rope4d_angles(torch.zeros(5, 3), 16)
    with pytest.raises(ValueError, match=r"x\.shape"):
        apply_rope4d(torch.zeros(5, 16), torch.zeros(5, 4))


def test_gradcheck_through_the_complex_rotation() -> None:
    x = torch.randn(2, 6, 16, dtype=torch.float64, requires_grad=True)
    angles = rope4d_angles(torch.randn(6, 4, dtype=torch.float64), 16)
    assert torch.autograd.gradcheck(lambda t: apply_rope4d(t, angles), (x,))
    # A non-contiguous slice (as after a fused qkv projection) rotates the same.
    wide = torch.randn(6, 48, dtype=torch.float64)
    torch.testing.assert_close(apply_rope4d(wide[:, 16:32], angles),
                               apply_rope4d(wide[:, 16:32].contiguous(), angles))
