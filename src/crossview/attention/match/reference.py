"""The reference MatchAttention backend: plain PyTorch, the readable statement of the semantics
(any device).

For every query at (x, y) the window centre is ``(x, y) + rel_pos``, clamped to
``[r, Wk-1-r-1e-3] x [r, Hk-1-r-1e-3]`` so the whole expanded window stays inside the key map.
The expanded window is the ``(2r+2)^2`` keys starting at ``floor(centre) - r``. BilinearSoftmax
takes four softmaxes over the ``(2r+1)^2`` sub-windows anchored at the nw, ne, sw and se integer
corners of the centre and mixes them with the bilinear weights of the centre's fractional part.
Autograd gives the gradients: ``rel_pos`` only receives them through the bilinear weights
(``floor`` is piecewise constant), zero where the clamp moved the centre.

This backend gathers every window (``[B, heads, N, (2r+2)^2, C]``), so it is memory hungry; the
fused ``cpu`` backend computes the same numbers without the gathers.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

from crossview.attention.match.backend import Backend, half_in_float32


def clamped_centres(rel_pos: torch.Tensor, radius: int, key_hw: tuple[int, int]) -> torch.Tensor:
    """Absolute window centres ``[B, Hq, Wq, h, 2]`` (x, y), clamped inside the key map.

    ``rel_pos`` is ``[B, Hq, Wq, h, 2]``; ``key_hw`` is ``(Hk, Wk)``.
    """
    _, hq, wq, _, _ = rel_pos.shape
    hk, wk = key_hw
    ys = torch.arange(hq, device=rel_pos.device, dtype=rel_pos.dtype)
    xs = torch.arange(wq, device=rel_pos.device, dtype=rel_pos.dtype)
    cx = rel_pos[..., 0] + xs[None, None, :, None]
    cy = rel_pos[..., 1] + ys[None, :, None, None]
    cx = cx.clamp(radius, wk - 1 - radius - 1e-3)
    cy = cy.clamp(radius, hk - 1 - radius - 1e-3)
    return torch.stack([cx, cy], dim=-1)


def bilinear_softmax(scores: torch.Tensor, frac: torch.Tensor, radius: int) -> torch.Tensor:
    """Mix the four sub-window softmaxes of an expanded window with bilinear weights.

    ``scores`` is ``[..., (2r+2)^2]`` row-major over (dy, dx); ``frac`` is ``[..., 2]``, the
    centre's fractional part (fx, fy). Returns the mixed weights ``[..., (2r+2)^2]``.
    """
    side = 2 * radius + 2
    grid = scores.unflatten(-1, (side, side))
    fx, fy = frac[..., 0:1], frac[..., 1:2]
    mixed = torch.zeros_like(scores)
    # (row offset, column offset, bilinear weight) of the nw, ne, sw, se sub-windows.
    corners = ((0, 0, (1 - fx) * (1 - fy)), (0, 1, fx * (1 - fy)),
               (1, 0, (1 - fx) * fy), (1, 1, fx * fy))
    for dy, dx, weight in corners:
        sub = grid[..., dy:dy + side - 1, dx:dx + side - 1]
        probs = sub.flatten(-2).softmax(dim=-1).unflatten(-1, (side - 1, side - 1))
        padded = F.pad(probs, (dx, 1 - dx, dy, 1 - dy))
        mixed = mixed + weight * padded.flatten(-2)
    return mixed


def match_attention_reference(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor,
                              rel_pos: torch.Tensor, radius: int, similarity: str,
                              scale: float) -> tuple[torch.Tensor, torch.Tensor]:
    """MatchAttention by explicit window gathers; inputs already validated.

    Shapes: q ``[B, Hq, Wq, h, C]``, k ``[B, Hk, Wk, h, C]``, v ``[B, Hk, Wk, h, Cv]``,
    rel_pos ``[B, Hq, Wq, h or 1, 2]``. Returns ``out [B, Hq, Wq, h, Cv]`` and the mixed weights
    ``attn [B, Hq, Wq, h, (2r+2)^2]`` (row-major over (dy, dx)).
    """
    batch, hq, wq, heads, channels = q.shape
    _, hk, wk, _, _ = k.shape
    side = 2 * radius + 2
    centre = clamped_centres(rel_pos, radius, (hk, wk)).expand(batch, hq, wq, heads, 2)
    corner = centre.detach().floor()
    frac = centre - corner
    offsets = torch.arange(-radius, radius + 2, device=q.device)
    corner = corner.long()
    key_x = corner[..., 0, None] + offsets  # [B, Hq, Wq, h, side]
    key_y = corner[..., 1, None] + offsets
    index = (key_y[..., :, None] * wk + key_x[..., None, :]).flatten(-2)  # [B, Hq, Wq, h, S]

    # Heads-first flattening so one gather per batch and head picks the window keys.
    index = index.permute(0, 3, 1, 2, 4).reshape(batch, heads, hq * wq * side * side)
    batch_idx = torch.arange(batch, device=q.device)[:, None, None]
    head_idx = torch.arange(heads, device=q.device)[None, :, None]
    k_heads = k.permute(0, 3, 1, 2, 4).reshape(batch, heads, hk * wk, channels)
    v_heads = v.permute(0, 3, 1, 2, 4).reshape(batch, heads, hk * wk, v.shape[-1])
    k_win = k_heads[batch_idx, head_idx, index].unflatten(2, (hq * wq, side * side))
    v_win = v_heads[batch_idx, head_idx, index].unflatten(2, (hq * wq, side * side))
    q_heads = q.permute(0, 3, 1, 2, 4).reshape(batch, heads, hq * wq, 1, channels)

    if similarity == "l1":
        scores = -(q_heads - k_win).abs().sum(-1) * scale
    else:
        scores = (q_heads * k_win).sum(-1) * scale  # [B, h, N, S]
    frac_heads = frac.permute(0, 3, 1, 2, 4).reshape(batch, heads, hq * wq, 2)
    attn = bilinear_softmax(scores, frac_heads, radius)
    out = (attn[..., None] * v_win).sum(-2)  # [B, h, N, Cv]
    out = out.unflatten(2, (hq, wq)).permute(0, 2, 3, 1, 4)
    attn = attn.unflatten(2, (hq, wq)).permute(0, 2, 3, 1, 4)
    return out, attn


# Runs any device and dtype, needs nothing built: always available, the chooser's last resort.
BACKEND = Backend(name="reference", label="slow reference",
                  unsupported=lambda device, dtype: None, missing=lambda: None,
                  forward=half_in_float32(match_attention_reference))
