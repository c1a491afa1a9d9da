"""``match_attention``: the public MatchAttention operator (validation and backend dispatch).

MatchAttention (MatchAttention paper, section 3) is sliding-window attention whose window centre
is the query position plus a continuous relative position, made differentiable by
BilinearSoftmax. :mod:`crossview.attention.match_reference` states the semantics in PyTorch;
the fused ``cpu`` backend computes the same numbers with C++ kernels.
"""

from __future__ import annotations

import math

import torch

from crossview.attention.match_backend import choose_backend, warn_fallback_once
from crossview.attention.match_reference import match_attention_reference

SIMILARITIES = ("l1", "dot")
DTYPES = (torch.float32, torch.float64, torch.bfloat16)


def _validate(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, rel_pos: torch.Tensor,
              radius: int, similarity: str) -> None:
    for name, tensor in (("q", q), ("k", k), ("v", v), ("rel_pos", rel_pos)):
        if not isinstance(tensor, torch.Tensor):
            raise TypeError(f"{name} must be a torch.Tensor, got {type(tensor).__name__}")
        if tensor.dim() != 5:
            raise ValueError(f"{name} must have 5 dimensions, got "
                             f"{name}.shape={tuple(tensor.shape)}")
    if q.dtype not in DTYPES:
        raise ValueError(f"q must be float32, float64 or bfloat16, got {q.dtype=}")
    for name, tensor in (("k", k), ("v", v), ("rel_pos", rel_pos)):
        if tensor.dtype != q.dtype:
            raise ValueError(f"{name} must have q's dtype, got {q.dtype=}, "
                             f"{name}.dtype={tensor.dtype}")
        if tensor.device != q.device:
            raise ValueError(f"{name} must be on q's device, got {q.device=}, "
                             f"{name}.device={tensor.device}")
    batch, _, _, heads, channels = q.shape
    _, hk, wk, _, _ = k.shape
    if k.shape[0] != batch or k.shape[3] != heads or k.shape[4] != channels:
        raise ValueError(f"k must be [B, Hk, Wk, heads, C] with q's B, heads and C, got "
                         f"{q.shape=}, {k.shape=}")
    if v.shape[:4] != k.shape[:4]:
        raise ValueError(f"v must be [B, Hk, Wk, heads, Cv] like k, got {k.shape=}, {v.shape=}")
    if rel_pos.shape[:3] != q.shape[:3] or rel_pos.shape[3] not in (1, heads) \
            or rel_pos.shape[4] != 2:
        raise ValueError(f"rel_pos must be [B, Hq, Wq, heads or 1, 2], got {q.shape=}, "
                         f"{rel_pos.shape=}")
    if min(q.shape) == 0 or min(k.shape) == 0 or v.shape[4] == 0:
        raise ValueError(f"empty tensors are not supported, got {q.shape=}, {k.shape=}, {v.shape=}")
    if isinstance(radius, bool) or not isinstance(radius, int) or radius < 0:
        raise ValueError(f"radius must be a non-negative int, got {radius=}")
    if 2 * radius + 2 > min(hk, wk):
        raise ValueError(f"radius {radius} needs a key map of at least {2 * radius + 2} x "
                         f"{2 * radius + 2} tokens (the expanded window), got {k.shape=}")
    if similarity not in SIMILARITIES:
        raise ValueError(f"similarity must be one of {SIMILARITIES}, got {similarity=}")


class NonFiniteError(ValueError):
    """``rel_pos`` holds NaN or infinity: in a network, its fields (or weights) diverged."""


def check_finite_rel_pos(rel_pos: torch.Tensor) -> None:
    """Raise :class:`NonFiniteError` (a ``ValueError``) if ``rel_pos [B, Hq, Wq, heads or 1,
    2]`` holds NaN or infinity (skipped while tracing; the fused op checks inside its kernel
    call, so fake tensors never reach this)."""
    if torch.compiler.is_compiling():
        return
    if not bool(torch.isfinite(rel_pos).all()):
        raise NonFiniteError(f"rel_pos must be finite, got NaN or inf in {rel_pos.shape=}")


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
        backend: ``"auto"`` (the process-wide default, see :func:`set_backend`), ``"cpu"`` or
            ``"reference"``.

    Returns:
        ``out [B, Hq, Wq, heads, Cv]`` (and ``attn`` if ``return_attn``), in the input dtype;
        bfloat16 is computed in float32. Differentiable in q, k, v and rel_pos (rel_pos through
        the bilinear weights; zero where the clamp moved the centre).

    Example:
        >>> import torch
        >>> from crossview.attention import match_attention
        >>> q = k = v = torch.randn(1, 8, 8, 2, 16)
        >>> rel_pos = torch.zeros(1, 8, 8, 1, 2)
        >>> match_attention(q, k, v, rel_pos, radius=1).shape
        torch.Size([1, 8, 8, 2, 16])
    """
    _validate(q, k, v, rel_pos, radius, similarity)
    scale = q.shape[-1] ** -0.5 if scale is None else float(scale)
    if not math.isfinite(scale):
        raise ValueError(f"scale must be finite, got {scale=}")
    choice = choose_backend(q.device, q.dtype, backend)
    warn_fallback_once(choice)
    if choice.name == "cpu":
        from crossview.attention.match_op import match_attention_op

        out, attn = match_attention_op(q, k, v, rel_pos, radius, similarity == "l1", scale,
                                       return_attn)
        return (out, attn) if return_attn else out
    check_finite_rel_pos(rel_pos)
    if q.dtype == torch.bfloat16:
        out, attn = match_attention_reference(q.float(), k.float(), v.float(), rel_pos.float(),
                                              radius, similarity, scale)
        out, attn = out.to(q.dtype), attn.to(q.dtype)
    else:
        out, attn = match_attention_reference(q, k, v, rel_pos, radius, similarity, scale)
    return (out, attn) if return_attn else out
