"""What a MatchAttention backend provides: :class:`Backend`, the interface the chooser
(:mod:`crossview.attention.match.choose`) works with.

Each backend file (``reference.py``, ``export.py``, ``cpu.py``, ``gpu.py``)
defines one ``BACKEND = Backend(...)``, and ``choose.py`` lists them in order of preference.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import torch

from crossview.attention.match.checks import check_finite_rel_pos

# (q, k, v, rel_pos, radius, similarity, scale) -> (out, attn) on validated inputs
Compute = Callable[[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor, int, str, float],
                   tuple[torch.Tensor, torch.Tensor]]
# (q, k, v, rel_pos, radius, similarity, scale, need_attn) -> (out, attn), see Backend.forward
Forward = Callable[[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor, int, str, float, bool],
                   tuple[torch.Tensor, torch.Tensor]]


@dataclass(frozen=True)
class Backend:
    """One implementation of MatchAttention, as the chooser sees it.

    Its "can I run here?" check (:meth:`unavailable_reason`) returns the reason it cannot, which
    serves both to choose a backend and to explain the choice. The reason comes in two parts, so
    that the chooser can tell a backend that does not apply to these tensors (silently skipped)
    from one that would apply but is broken on this machine (skipped with a warning).

    Attributes:
        name: what ``backend=``, ``set_backend`` and ``$CROSSVIEW_MATCH_BACKEND`` call it.
        label: a few words for messages, e.g. ``"slow reference"``.
        unsupported: ``(device, dtype) -> reason or None``: why tensors on this device with this
            dtype cannot run on it. Cheap: builds and loads nothing.
        missing: ``() -> reason or None``: why it cannot run on this machine at all (cannot be
            built, not installed). May build on the first call; cached afterwards.
        forward: ``(q, k, v, rel_pos, radius, similarity, scale, need_attn) -> (out, attn)``
            on validated inputs (q ``[B, Hq, Wq, h, C]``, k ``[B, Hk, Wk, h, C]``,
            v ``[B, Hk, Wk, h, Cv]``, rel_pos ``[B, Hq, Wq, h or 1, 2]``), differentiable in
            q, k, v and rel_pos; checks that rel_pos is finite. Returns ``out [B, Hq, Wq, h, Cv]``
            and the mixed weights ``attn [B, Hq, Wq, h, (2r+2)^2]`` in the input dtype (``attn``
            is meaningful only if ``need_attn``).
        explicit_only: ``device -> reason or None``: why ``"auto"`` passes over it for tensors
            on this device although it runs there, so that it runs only when named (the
            ``triton`` backend on CPU tensors under Triton's interpreter, a test mode).
    """

    name: str
    label: str
    unsupported: Callable[[torch.device, torch.dtype], str | None]
    missing: Callable[[], str | None]
    forward: Forward
    explicit_only: Callable[[torch.device], str | None] = lambda device: None

    def unavailable_reason(self, device: torch.device, dtype: torch.dtype) -> str | None:
        """Why this backend cannot run tensors on ``device`` with ``dtype`` here, or ``None``."""
        return self.unsupported(device, dtype) or self.missing()


def half_in_float32(compute: Compute) -> Forward:
    """A :attr:`Backend.forward` from a plain PyTorch ``compute`` that always returns the
    weights: it checks that rel_pos is finite, and computes bfloat16 and float16 in float32,
    rounding the results once."""

    def forward(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, rel_pos: torch.Tensor,
                radius: int, similarity: str, scale: float,
                need_attn: bool) -> tuple[torch.Tensor, torch.Tensor]:
        check_finite_rel_pos(rel_pos)
        if q.dtype in (torch.bfloat16, torch.float16):
            out, attn = compute(q.float(), k.float(), v.float(), rel_pos.float(), radius,
                                similarity, scale)
            return out.to(q.dtype), attn.to(q.dtype)
        return compute(q, k, v, rel_pos, radius, similarity, scale)

    return forward
