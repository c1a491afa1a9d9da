"""Match-to-match attention layers (TransforMatcher Eq. 5-7).

Every candidate match of the 4D correlation is a token. A layer is pre-LayerNorm multi-head
attention over all matches (queries and keys carry 4D rotary positions) followed by a GELU MLP,
each with a residual. ``attention="additive"`` is the paper's linear-cost attention;
``attention="standard"`` is softmax attention with the same parameters, for the comparison of the
paper's Table 3 (its cost is quadratic in the number of matches).
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from crossview.attention.additive import additive_attention
from crossview.attention.rope4d import apply_rope4d

ATTENTION_KINDS = ("additive", "standard")


class MatchToMatchAttention(nn.Module):
    """Multi-head attention over match tokens ``[B, T, dim]`` with 4D RoPE on queries and keys."""

    def __init__(self, dim: int = 16, heads: int = 8, head_dim: int = 4,
                 attention: str = "additive") -> None:
        super().__init__()
        if attention not in ATTENTION_KINDS:
            raise ValueError(f"attention must be one of {ATTENTION_KINDS}, got {attention!r}")
        self.heads, self.head_dim, self.attention = heads, head_dim, attention
        inner = heads * head_dim
        self.qkv = nn.Linear(dim, 3 * inner)
        self.out = nn.Linear(inner, dim)
        if attention == "additive":
            self.w_q = nn.Parameter(nn.init.normal_(torch.empty(heads, head_dim), std=0.5))
            self.w_k = nn.Parameter(nn.init.normal_(torch.empty(heads, head_dim), std=0.5))

    def forward(self, x: Tensor, rotation: Tensor) -> Tensor:
        """``x [B, T, dim]``, complex rotary ``rotation [T, heads * head_dim / 2]`` (see
        :func:`~crossview.attention.rope4d.rope4d_rotation`) -> ``[B, T, dim]``."""
        inner = self.heads * self.head_dim
        qkv = self.qkv(x)  # [B, T, 3 * inner]; q, k, v stay views of it
        q = apply_rope4d(qkv[..., :inner], rotation)
        k = apply_rope4d(qkv[..., inner:2 * inner], rotation)
        v = qkv[..., 2 * inner:]
        q, k, v = (t.unflatten(-1, (self.heads, self.head_dim)) for t in (q, k, v))
        if self.attention == "additive":
            # Fastformer adds the query back before the output projection.
            u = additive_attention(q, k, v, self.w_q, self.w_k) + q
        else:
            u = F.scaled_dot_product_attention(*(t.transpose(1, 2) for t in (q, k, v)))
            u = u.transpose(1, 2)
        return self.out(u.flatten(2))


class MatchToMatchLayer(nn.Module):
    """``x + Attn(LN(x))`` then ``x + MLP(LN(x))`` on match tokens ``[B, T, dim]``."""

    def __init__(self, dim: int = 16, heads: int = 8, head_dim: int = 4, mlp_dim: int = 64,
                 attention: str = "additive") -> None:
        super().__init__()
        self.norm1 = nn.LayerNorm(dim)
        self.attn = MatchToMatchAttention(dim, heads, head_dim, attention)
        self.norm2 = nn.LayerNorm(dim)
        self.mlp = nn.Sequential(nn.Linear(dim, mlp_dim), nn.GELU(), nn.Linear(mlp_dim, dim))

    def forward(self, x: Tensor, rotation: Tensor) -> Tensor:
        """``x [B, T, dim]``, complex rotary ``rotation [T, inner / 2]`` -> ``[B, T, dim]``."""
        x = x + self.attn(self.norm1(x), rotation)
        return x + self.mlp(self.norm2(x))
