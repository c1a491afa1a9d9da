"""One MatchDecoder layer: self-MatchAttention, gated cross-MatchAttention, ConvGLU.

All tensors are channel-last and hold both views on the batch axis (``[2B, H, W, ...]``,
reference first); cross-attention takes its keys and values from the other view's row.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import nn

from crossview.attention import match_attention
from crossview.geometry.consistency import noc_mask, other_view
from crossview.nn.convglu import ConvGLU
from crossview.nn.norms import ChannelLayerNorm


class SelfMatchAttention(nn.Module):
    """Self-MatchAttention with one window centre per head.

    ``forward(x [N, H, W, in_dim], rel_pos [N, H, W, heads, 2]) -> [N, H, W, out_dim]``. The
    attention runs in ``rel_pos``'s dtype (float32 under bfloat16 autocast: positions need it);
    q, k, v map ``in_dim -> dim`` (no bias), negative-L1 scores scaled by ``(dim/heads)**-0.5``,
    ``proj`` maps ``dim -> out_dim`` (no bias).
    """

    def __init__(self, dim: int, in_dim: int, out_dim: int, heads: int, radius: int) -> None:
        super().__init__()
        self.heads, self.radius = heads, radius
        self.q = nn.Linear(in_dim, dim, bias=False)
        self.k = nn.Linear(in_dim, dim, bias=False)
        self.v = nn.Linear(in_dim, dim, bias=False)
        self.proj = nn.Linear(dim, out_dim, bias=False)

    def forward(self, x: torch.Tensor, rel_pos: torch.Tensor) -> torch.Tensor:
        q, k, v = (_heads_in(lin(x), self.heads, rel_pos.dtype)
                   for lin in (self.q, self.k, self.v))
        out = match_attention(q, k, v, rel_pos, self.radius, scale=q.shape[-1] ** -0.5)
        return self.proj(out.flatten(-2))


class CrossMatchAttention(nn.Module):
    """Gated cross-MatchAttention between the two views (Eq. 10-11).

    ``forward(x [2B, H, W, in_dim], field [2B, H, W, 2]) -> (out [2B, H, W, in_dim], attn)``.
    Queries come from each row, keys and values from the other view's row; all heads share the
    window centre ``position + field``. With ``gating`` the attention output is multiplied by
    ``SiLU(g(x))``; with ``attn_to_proj`` the BilinearSoftmax weights ``attn [2B, H, W, heads,
    (2r+2)^2]`` are concatenated (head-major) before ``proj`` and returned (else ``None``).
    """

    def __init__(self, dim: int, in_dim: int, heads: int, radius: int, *, gating: bool = True,
                 attn_to_proj: bool = True) -> None:
        super().__init__()
        self.heads, self.radius, self.attn_to_proj = heads, radius, attn_to_proj
        self.q = nn.Linear(in_dim, dim, bias=False)
        self.k = nn.Linear(in_dim, dim, bias=False)
        self.v = nn.Linear(in_dim, dim, bias=False)
        self.g = nn.Sequential(nn.Linear(in_dim, dim, bias=False), nn.SiLU()) if gating else None
        extra = heads * (2 * radius + 2) ** 2 if attn_to_proj else 0
        self.proj = nn.Linear(dim + extra, in_dim, bias=False)

    def forward(self, x: torch.Tensor, field: torch.Tensor
                ) -> tuple[torch.Tensor, torch.Tensor | None]:
        other = other_view(x)
        q = _heads_in(self.q(x), self.heads, field.dtype)
        k = _heads_in(self.k(other), self.heads, field.dtype)
        v = _heads_in(self.v(other), self.heads, field.dtype)
        result = match_attention(q, k, v, field.unsqueeze(3), self.radius,
                                 scale=q.shape[-1] ** -0.5, return_attn=self.attn_to_proj)
        out, attn = result if self.attn_to_proj else (result, None)
        out = out.flatten(-2)
        if self.g is not None:
            out = self.g(x) * out
        if attn is not None:
            out = torch.cat([out, attn.flatten(-2)], dim=-1)
        return self.proj(out), attn


@dataclass
class LayerOutput:
    """What one layer returns: features ``x [N, H, W, C]``, per-head self relative positions
    ``self_rpos [N, H, W, 2*heads]``, the field after self-attention (``field_self``) and after
    cross-attention (``field``, the layer's result), both ``[N, H, W, 2]``, the
    non-occlusion mask the layer computed from its input field (``noc [N, H, W]``, 0/1) and the
    cross-attention weights ``attn [N, H, W, heads, (2r+2)^2]`` (``None`` without
    ``attn_to_proj``)."""

    x: torch.Tensor
    self_rpos: torch.Tensor
    field_self: torch.Tensor
    field: torch.Tensor
    noc: torch.Tensor
    attn: torch.Tensor | None = None


class MatchAttentionLayer(nn.Module):
    """Self-MatchAttention -> cross-MatchAttention -> ConvGLU, with the field in the channels.

    The field enters as two extra channels ``field * field_scale`` and the self relative
    positions as ``2*heads`` more; attention residuals update both, and they are read back out
    (the field divided by ``field_scale``). For stereo the field's y channel is kept at 0.
    """

    def __init__(self, dim: int, heads: int, radius: int, *, gating: bool = True,
                 attn_to_proj: bool = True, noc_mask_embedding: bool = True,
                 field_scale_init: float = 0.1, noc_threshold: float = 2.0) -> None:
        super().__init__()
        self.dim, self.heads = dim, heads
        self.noc_mask_embedding, self.noc_threshold = noc_mask_embedding, noc_threshold
        carried = dim + 2 + 2 * heads
        self.field_scale = nn.Parameter(torch.full((1, 1, 1, 2), field_scale_init))
        self.norm0 = ChannelLayerNorm(carried)
        self.match_attention_self = SelfMatchAttention(
            dim, carried + int(noc_mask_embedding), carried, heads, radius)
        self.norm1 = ChannelLayerNorm(dim + 2)
        self.match_attention_cross = CrossMatchAttention(
            dim, dim + 2, heads, radius, gating=gating, attn_to_proj=attn_to_proj)
        self.norm2 = ChannelLayerNorm(dim)
        self.mlp = ConvGLU(dim)

    def forward(self, x: torch.Tensor, self_rpos: torch.Tensor, field: torch.Tensor,
                stereo: bool) -> LayerOutput:
        """``x [N, H, W, C]``, ``self_rpos [N, H, W, 2*heads]``, ``field [N, H, W, 2]``."""
        noc = noc_mask(field.detach(), self.noc_threshold).to(x.dtype)
        x = torch.cat([x, field * self.field_scale, self_rpos], dim=-1)
        normed = self.norm0(x)
        if self.noc_mask_embedding:
            normed = torch.cat([normed, noc.unsqueeze(-1)], dim=-1)
        x = x + self.match_attention_self(normed, self_rpos.unflatten(-1, (self.heads, 2)))
        x, self_rpos = x[..., : self.dim + 2], x[..., self.dim + 2:]
        if stereo:
            _zero_y(x)
        field_self = x[..., -2:] / self.field_scale
        cross, attn = self.match_attention_cross(self.norm1(x), field_self)
        x = x + cross
        if stereo:
            _zero_y(x)
        field = x[..., -2:] / self.field_scale
        x = x[..., : self.dim]
        x = x + self.mlp(self.norm2(x))
        return LayerOutput(x, self_rpos, field_self, field, noc, attn)


def _heads_in(x: torch.Tensor, heads: int, dtype: torch.dtype) -> torch.Tensor:
    """``x [..., heads * C]`` as ``[..., heads, C]`` in ``dtype``; converted only when it is
    another dtype (bfloat16 autocast), so that an fp32 trace for export records no conversion
    (the export time grows with the graph)."""
    x = x.unflatten(-1, (heads, x.shape[-1] // heads))
    return x if x.dtype == dtype else x.to(dtype)


def _zero_y(x: torch.Tensor) -> None:
    """Set the last channel (the field's y, scaled) to 0 in place.

    Safe for autograd: ``x`` is always a fresh residual sum that no backward node has saved.
    """
    x[..., -1].zero_()
