"""``match_attention``: the public MatchAttention operator (validation and backend dispatch).

MatchAttention (MatchAttention paper, section 3) is sliding-window attention whose window centre
is the query position plus a continuous relative position, made differentiable by
BilinearSoftmax. :mod:`crossview.attention.match.reference` states the semantics in PyTorch;
the fused ``cpu`` backend computes the same numbers with C++ kernels, the ``triton`` backend
with Triton kernels on CUDA tensors.
"""

from __future__ import annotations

import math

import torch

from crossview.attention.match.checks import validate
from crossview.attention.match.choose import backend_for


def match_attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, rel_pos: torch.Tensor,
                    radius: int, *, similarity: str = "l1", scale: float | None = None,
                    return_attn: bool = False, backend: str = "auto",
                    ) -> torch.Tensor | tuple[torch.Tensor, torch.Tensor]:
    """MatchAttention: window attention around ``query position + rel_pos`` with BilinearSoftmax.

    Args:
        q: queries ``[B, Hq, Wq, heads, C]``.
        k: keys ``[B, Hk, Wk, heads, C]``.
        v: values ``[B, Hk, Wk, heads, Cv]``.
        rel_pos: relative positions ``[B, Hq, Wq, heads, 2]`` (x, y) in key-map token units, or
            ``[B, Hq, Wq, 1, 2]`` shared by all heads. The window centre of the query at (x, y) is
            ``(x, y) + rel_pos``, clamped to ``[r, Wk-1-r-1e-3] x [r, Hk-1-r-1e-3]``.
        radius: ``r``; the expanded window has ``(2r+2)^2`` keys, each sub-window ``(2r+1)^2``.
        similarity: ``"l1"`` (negative L1 distance) or ``"dot"`` (dot product).
        scale: score scale, ``C**-0.5`` by default.
        return_attn: also return the mixed weights ``[B, Hq, Wq, heads, (2r+2)^2]``, row-major
            over (dy, dx) with offsets ``-r .. r+1`` from ``floor(centre)``.
        backend: ``"auto"`` (the process-wide default, see :func:`set_backend`), ``"triton"``,
            ``"cpu"``, ``"reference"`` or ``"export"`` (ONNX-exportable operators).

    Returns:
        ``out [B, Hq, Wq, heads, Cv]`` (and ``attn`` if ``return_attn``), in the input dtype;
        bfloat16 and float16 are computed in float32. Differentiable in q, k, v and rel_pos
        (rel_pos through the bilinear weights; zero where the clamp moved the centre).

    Example:
        >>> import torch
        >>> from crossview.attention import match_attention
        >>> q = k = v = torch.randn(1, 8, 8, 2, 16)
        >>> rel_pos = torch.zeros(1, 8, 8, 1, 2)
        >>> match_attention(q, k, v, rel_pos, radius=1).shape
        torch.Size([1, 8, 8, 2, 16])
    """
    validate(q, k, v, rel_pos, radius, similarity)
    scale = q.shape[-1] ** -0.5 if scale is None else float(scale)
    if not math.isfinite(scale):
        raise ValueError(f"scale must be finite, got {scale=}")
    run = backend_for(q.device, q.dtype, backend).forward
    out, attn = run(q, k, v, rel_pos, radius, similarity, scale, return_attn)
    return (out, attn) if return_attn else out
