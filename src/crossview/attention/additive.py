"""Additive attention (Fastformer): global context in time and memory linear in the tokens.

TransforMatcher attends over every candidate match of a 4D correlation (``T = (h * w) ** 2``
tokens, 50 625 at 15 x 15), where a ``T x T`` attention matrix does not fit. Additive attention
summarises the queries into one global query with a learned softmax pooling, mixes it into the
keys elementwise, pools those into one global key, and mixes that into the values::

    alpha = softmax_t(q_t . w_q / sqrt(D))        g_q = sum_t alpha_t q_t
    p_t   = g_q * k_t
    beta  = softmax_t(p_t . w_k / sqrt(D))        g_k = sum_t beta_t p_t
    u_t   = g_k * v_t

Layout is token-major ``[B, T, heads, D]`` (the layout of a fused ``qkv`` projection's output,
so no transposes are needed); ``w_q``, ``w_k`` are ``[heads, D]``.

Every step is one matrix product over all heads at once, with block-diagonal ``[heads * D,
heads]`` matrices for the per-head dot products, and ``p`` is never materialised:
``p_t . w_k = k_t . (g_q * w_k)`` and ``g_k = g_q * sum_t beta_t k_t``.
"""

from __future__ import annotations

import math

import torch
from torch import Tensor


def _block_diagonal(w: Tensor) -> Tensor:
    """``w [..., heads, D]`` -> ``[..., heads * D, heads]``, column ``h`` holds ``w[..., h, :]``
    in rows ``h * D ... h * D + D - 1``: ``x [.., heads * D] @ it`` is the per-head dot product."""
    heads = w.shape[-2]
    eye = torch.eye(heads, dtype=w.dtype, device=w.device)
    return (w.unsqueeze(-1) * eye.unsqueeze(-2)).flatten(-3, -2)


def _pool(weights: Tensor, x: Tensor) -> Tensor:
    """Per-head weighted sum over tokens: ``weights [B, T, heads]``, ``x [B, T, heads * D]`` ->
    ``[B, heads, D]`` (the diagonal blocks of ``weights^T @ x``)."""
    heads = weights.shape[-1]
    full = weights.transpose(1, 2) @ x  # [B, heads, heads * D]
    return full.unflatten(-1, (heads, -1)).diagonal(dim1=1, dim2=2).transpose(1, 2)


def additive_attention(q: Tensor, k: Tensor, v: Tensor, w_q: Tensor, w_k: Tensor) -> Tensor:
    """Additive attention of ``q, k, v [B, T, heads, D]`` with pooling vectors ``w_q, w_k
    [heads, D]``; returns ``u [B, T, heads, D]``. Cost ``O(B * T * heads^2 * D)``.

    Example:
        >>> q = k = v = torch.randn(1, 10, 2, 4)
        >>> additive_attention(q, k, v, torch.randn(2, 4), torch.randn(2, 4)).shape
        torch.Size([1, 10, 2, 4])
    """
    if q.ndim != 4 or k.shape != q.shape or v.shape != q.shape:
        raise ValueError(f"q, k, v must share one [B, T, heads, D] shape, got {q.shape=} "
                         f"{k.shape=} {v.shape=}")
    heads, dim = q.shape[2], q.shape[3]
    for name, w in (("w_q", w_q), ("w_k", w_k)):
        if w.shape != (heads, dim):
            raise ValueError(f"{name} must be [heads, D] = [{heads}, {dim}], got {w.shape=}")
    scale = 1.0 / math.sqrt(dim)
    q, k, v = q.flatten(2), k.flatten(2), v.flatten(2)  # [B, T, heads * D]
    alpha = (q @ _block_diagonal(w_q * scale)).softmax(dim=1)  # [B, T, heads]
    global_q = _pool(alpha, q)  # [B, heads, D]
    beta = (k @ _block_diagonal(global_q * w_k * scale)).softmax(dim=1)
    global_k = global_q * _pool(beta, k)
    return (global_k.flatten(1).unsqueeze(1) * v).unflatten(-1, (heads, dim))
