from __future__ import annotations

import math

import pytest
import torch

from crossview.attention.additive import additive_attention


def _naive(q, k, v, w_q, w_k):
    """Fastformer written with explicit loops over batch, heads and tokens ([B, T, heads, D])."""
    b, t, h, d = q.shape
    out = torch.zeros_like(q)
    for bi in range(b):
        for hi in range(h):
            a = torch.stack([q[bi, i, hi] @ w_q[hi] / math.sqrt(d) for i in range(t)]).softmax(0)
            g = sum(a[i] * q[bi, i, hi] for i in range(t))
            p = [g * k[bi, i, hi] for i in range(t)]
            be = torch.stack([p[i] @ w_k[hi] / math.sqrt(d) for i in range(t)]).softmax(0)
            gk = sum(be[i] * p[i] for i in range(t))
            for i in range(t):
                out[bi, i, hi] = gk * v[bi, i, hi]
    return out


def _inputs(seed: int = 0, b: int = 2, h: int = 3, t: int = 7, d: int = 4):
    gen = torch.Generator().manual_seed(seed)
    q, k, v = (torch.randn(b, t, h, d, generator=gen, dtype=torch.float64) for _ in range(3))
    w_q, w_k = (torch.randn(h, d, generator=gen, dtype=torch.float64) for _ in range(2))
    return q, k, v, w_q, w_k


def test_matches_naive_loops() -> None:
    args = _inputs()
    torch.testing.assert_close(additive_attention(*args), _naive(*args))


def test_gradcheck() -> None:
    args = tuple(a.requires_grad_() for a in _inputs(1, b=1, h=2, t=5, d=3))
    assert torch.autograd.gradcheck(additive_attention, args)


def test_token_permutation_equivariance() -> None:
    q, k, v, w_q, w_k = _inputs(2, t=11)
    perm = torch.randperm(11, generator=torch.Generator().manual_seed(3))
    out = additive_attention(q, k, v, w_q, w_k)
    out_perm = additive_attention(q[:, perm], k[:, perm], v[:, perm], w_q, w_k)
    torch.testing.assert_close(out_perm, out[:, perm])


def test_global_context_reaches_every_token() -> None:
    q, k, v, w_q, w_k = _inputs(4)
    out = additive_attention(q, k, v, w_q, w_k)
    q2 = q.clone()
    q2[:, 0] += 1.0  # changing one query changes the output of every other token
    out2 = additive_attention(q2, k, v, w_q, w_k)
    assert ((out2 - out)[:, 1:].abs().amax(dim=-1) > 0).all()


def test_bad_shapes_are_named() -> None:
    q, k, v, w_q, w_k = _inputs()
    with pytest.raises(ValueError, match=r"k\.shape"):
        additive_attention(q, k[:, :3], v, w_q, w_k)
    with pytest.raises(ValueError, match="w_k"):
        additive_attention(q, k, v, w_q, w_k[:1])
