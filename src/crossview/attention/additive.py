"""Additive attention (Fastformer): global context in time and memory linear in the tokens.

TransforMatcher attends over every candidate match of a 4D correlation (``T = (h * w) ** 2``
tokens, 50 625 at 15 x 15), where a ``T x T`` attention matrix does not fit. Additive attention
summarises the queries into one global query with a learned softmax pooling, mixes it into the
keys elementwise, pools those into one global key, and mixes that into the values::

    alpha = softmax_t(q_t . w_q / sqrt(D))        g_q = sum_t alpha_t q_t
    p_t   = g_q * k_t
    beta  = softmax_t(p_t . w_k / sqrt(D))        g_k = sum_t beta_t p_t
    u_t   = g_k * v_t

Layout is torch's SDPA layout ``[B, heads, T, D]``; ``w_q``, ``w_k`` are ``[heads, D]``.
"""

from __future__ import annotations

import math

from torch import Tensor


def additive_attention(q: Tensor, k: Tensor, v: Tensor, w_q: Tensor, w_k: Tensor) -> Tensor:
    """Additive attention of ``q, k, v [B, heads, T, D]`` with pooling vectors ``w_q, w_k
    [heads, D]``; returns ``u [B, heads, T, D]``. Cost ``O(B * heads * T * D)``.

    Example:
        >>> q = k = v = torch.randn(1, 2, 10, 4)
        >>> additive_attention(q, k, v, torch.randn(2, 4), torch.randn(2, 4)).shape
        torch.Size([1, 2, 10, 4])
    """
    if q.ndim != 4 or k.shape != q.shape or v.shape != q.shape:
        raise ValueError(f"q, k, v must share one [B, heads, T, D] shape, got {q.shape=} "
                         f"{k.shape=} {v.shape=}")
    heads, dim = q.shape[1], q.shape[3]
    for name, w in (("w_q", w_q), ("w_k", w_k)):
        if w.shape != (heads, dim):
            raise ValueError(f"{name} must be [heads, D] = [{heads}, {dim}], got {w.shape=}")
    scale = 1.0 / math.sqrt(dim)
    alpha = (q @ w_q.unsqueeze(-1) * scale).softmax(dim=2)  # [B, heads, T, 1]
    global_q = (alpha * q).sum(dim=2, keepdim=True)
    p = global_q * k
    beta = (p @ w_k.unsqueeze(-1) * scale).softmax(dim=2)
    global_k = (beta * p).sum(dim=2, keepdim=True)
    return global_k * v
