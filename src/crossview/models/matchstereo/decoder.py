"""One MatchDecoder scale: a stack of MatchAttention layers on one feature resolution."""

from __future__ import annotations

from dataclasses import dataclass, field

import torch
from torch import nn

from crossview.models.matchstereo.layer import MatchAttentionLayer


@dataclass
class ScaleOutput:
    """Result of one decoder scale.

    ``x [N, H, W, C]`` final features, ``self_rpos [N, H, W, 2]`` (averaged over heads),
    ``field [N, H, W, 2]``, and per layer: ``fields`` / ``kinds`` (``"self"`` then ``"cross"``)
    and ``noc_masks`` (one per layer, ``[N, H, W]``); ``attn`` the last layer's cross-attention
    weights ``[N, H, W, heads, (2r+2)^2]`` (``None`` without ``attn_to_proj``).
    """

    x: torch.Tensor
    self_rpos: torch.Tensor
    field: torch.Tensor
    fields: list[torch.Tensor] = field(default_factory=list)
    kinds: list[str] = field(default_factory=list)
    noc_masks: list[torch.Tensor] = field(default_factory=list)
    attn: torch.Tensor | None = None


class MatchDecoderScale(nn.Module):
    """``layers`` MatchAttention layers sharing channels ``dim``, ``heads`` and ``radius``.

    ``forward(x [N, H, W, C], self_rpos [N, H, W, 2], field [N, H, W, 2], stereo)``: the self
    relative positions are repeated per head on entry and averaged over heads on exit.
    """

    def __init__(self, dim: int, depth: int, heads: int, radius: int, **layer_options) -> None:
        super().__init__()
        self.heads = heads
        self.layers = nn.ModuleList(
            MatchAttentionLayer(dim, heads, radius, **layer_options) for _ in range(depth))

    def forward(self, x: torch.Tensor, self_rpos: torch.Tensor, field: torch.Tensor,
                stereo: bool) -> ScaleOutput:
        per_head = self_rpos.repeat(1, 1, 1, self.heads)
        result = ScaleOutput(x, self_rpos, field)
        for layer in self.layers:
            out = layer(x, per_head, field, stereo)
            x, per_head, field = out.x, out.self_rpos, out.field
            result.fields += [out.field_self, out.field]
            result.kinds += ["self", "cross"]
            result.noc_masks.append(out.noc)
        result.x, result.field, result.attn = x, field, out.attn
        result.self_rpos = per_head.unflatten(-1, (self.heads, 2)).mean(-2)
        return result
