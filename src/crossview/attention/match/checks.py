"""Input checks of MatchAttention, shared by :func:`crossview.attention.match.match_attention`
(shapes, dtypes, devices, arguments) and the backends (finite relative positions)."""

from __future__ import annotations

import torch

SIMILARITIES = ("l1", "dot")
DTYPES = (torch.float32, torch.float64, torch.bfloat16, torch.float16)


def validate(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, rel_pos: torch.Tensor,
             radius: int, similarity: str) -> None:
    """Raise ``TypeError``/``ValueError`` naming the argument unless q ``[B, Hq, Wq, h, C]``,
    k ``[B, Hk, Wk, h, C]``, v ``[B, Hk, Wk, h, Cv]`` and rel_pos ``[B, Hq, Wq, h or 1, 2]`` are
    non-empty tensors of one supported dtype and device, ``radius`` fits the key map and
    ``similarity`` is known."""
    for name, tensor in (("q", q), ("k", k), ("v", v), ("rel_pos", rel_pos)):
        if not isinstance(tensor, torch.Tensor):
            raise TypeError(f"{name} must be a torch.Tensor, got {type(tensor).__name__}")
        if tensor.dim() != 5:
            raise ValueError(f"{name} must have 5 dimensions, got "
                             f"{name}.shape={tuple(tensor.shape)}")
    if q.dtype not in DTYPES:
        raise ValueError(f"q must be float32, float64, bfloat16 or float16, got {q.dtype=}")
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
