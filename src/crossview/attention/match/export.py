"""The ``export`` MatchAttention backend: the same numbers as the reference, written with only
operators that every ONNX runtime has, for :mod:`crossview.export` (any device).

Two choices make it exportable (``torch.onnx.export`` with dynamic height and width):

- one ``Gather`` per table: keys and values are flattened over (batch, head, position), and
  each window key is picked by one flat row index (``index_select``), where the reference
  indexes with three broadcast index tensors;
- the four BilinearSoftmax sub-window softmaxes run at once over the whole expanded window,
  cells outside a sub-window masked to ``-inf`` by a constant ``[4, (2r+2)^2]`` mask, and are
  mixed by one weighted sum (no padding, no loop); the window centre is clamped with float
  bounds only (a mixed int/float ``clamp`` does not decompose for ONNX in torch 2.13).

The export time grows with the traced graph (about 3 ms per operator on this machine, for each
of torch.export, the decomposition and the translation, twice per layer with the low-resolution
initialisation), so the operators are few: the sub-window mask is one constant, positions are
made in their dtype at once.

The window layout, clamping and gradients are those of
:mod:`crossview.attention.match.reference`; the backend tests hold it to that reference in every
dtype, forward and backward.
"""

from __future__ import annotations

import math

import torch

from crossview.attention.match.backend import Backend, half_in_float32


def sub_window_mask(radius: int, device: torch.device, dtype: torch.dtype) -> torch.Tensor:
    """``[4, (2r+2)^2]``: 0 on the cells of the nw, ne, sw and se sub-windows (``(2r+1)^2``
    each) of the expanded window (row-major over (dy, dx)), ``-inf`` elsewhere.

    Built in Python and made a tensor at once, so that a trace holds one constant instead of
    the ~50 operators that computing it with tensors takes (per attention call: the export
    time grows with the graph)."""
    side = 2 * radius + 2
    return torch.tensor([[0.0 if dy <= y < dy + side - 1 and dx <= x < dx + side - 1
                          else -math.inf for y in range(side) for x in range(side)]
                         for dy, dx in ((0, 0), (0, 1), (1, 0), (1, 1))],
                        device=device, dtype=dtype)


def match_attention_gathers(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor,
                            rel_pos: torch.Tensor, radius: int, similarity: str,
                            scale: float) -> tuple[torch.Tensor, torch.Tensor]:
    """MatchAttention by flat-index gathers and masked softmaxes; inputs already validated.

    Shapes as :func:`crossview.attention.match.reference.match_attention_reference`: q
    ``[B, Hq, Wq, h, C]``, k ``[B, Hk, Wk, h, C]``, v ``[B, Hk, Wk, h, Cv]``, rel_pos
    ``[B, Hq, Wq, h or 1, 2]``; returns ``out [B, Hq, Wq, h, Cv]`` and the mixed weights
    ``attn [B, Hq, Wq, h, (2r+2)^2]``.
    """
    batch, hq, wq, heads, channels = q.shape
    hk, wk = k.shape[1], k.shape[2]
    side = 2 * radius + 2
    ys = torch.arange(hq, device=q.device, dtype=rel_pos.dtype)
    xs = torch.arange(wq, device=q.device, dtype=rel_pos.dtype)
    low = float(radius)
    cx = (rel_pos[..., 0] + xs[:, None]).clamp(low, (wk - 1 - radius) - 1e-3)
    cy = (rel_pos[..., 1] + ys[:, None, None]).clamp(low, (hk - 1 - radius) - 1e-3)
    x0, y0 = cx.floor(), cy.floor()  # floor's gradient is 0: no detach needed
    fx, fy = cx - x0, cy - y0  # [B, Hq, Wq, h or 1]

    # flat row of the window's first key in a [B * Hk * Wk * h] table, then the window offsets
    offsets = torch.arange(-radius, radius + 2, device=q.device)
    window = (offsets[:, None] * (wk * heads) + offsets[None, :] * heads).flatten()
    table = hk * wk * heads  # rows of one batch element
    first = torch.arange(0, batch * table, table, device=q.device).view(batch, 1, 1, 1)
    heads_at = torch.arange(heads, device=q.device)
    start = first + (y0.long() * wk + x0.long()) * heads + heads_at  # [B, Hq, Wq, h]
    rows = (start[..., None] + window).flatten()
    k_win = k.reshape(-1, channels).index_select(0, rows).reshape(
        batch, hq, wq, heads, side * side, channels)
    v_win = v.reshape(-1, v.shape[-1]).index_select(0, rows).reshape(
        batch, hq, wq, heads, side * side, v.shape[-1])

    if similarity == "l1":
        scores = -(q[..., None, :] - k_win).abs().sum(-1) * scale
    else:
        scores = (q[..., None, :] * k_win).sum(-1) * scale  # [B, Hq, Wq, h, S]
    masked = scores[..., None, :] + sub_window_mask(radius, q.device, scores.dtype)
    probs = masked.softmax(dim=-1)  # [B, Hq, Wq, h, 4, S]
    gx, gy = 1 - fx, 1 - fy
    corners = torch.stack([gx * gy, fx * gy, gx * fy, fx * fy], dim=-1)  # [B, Hq, Wq, h or 1, 4]
    attn = (corners[..., None] * probs).sum(-2)
    out = (attn[..., None] * v_win).sum(-2)
    return out, attn


# Plain PyTorch like the reference, so it runs anywhere; after the reference in the chooser's
# order, so "auto" never picks it: it is named by crossview.export while tracing.
BACKEND = Backend(name="export", label="export-friendly gather",
                  unsupported=lambda device, dtype: None, missing=lambda: None,
                  forward=half_in_float32(match_attention_gathers))
