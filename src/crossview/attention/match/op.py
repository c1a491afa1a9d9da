"""The fused MatchAttention kernels as PyTorch custom operators (``torch.library``).

``crossview::match_attention`` and ``crossview::match_attention_backward`` run the C++ kernels
of :mod:`crossview.cpu_kernels.cpu_build` on CPU tensors; fake (meta) implementations give
their output shapes, so ``torch.compile`` and ``torch.export`` see one opaque op, and
``torch.library.register_autograd`` connects the backward kernel. Inputs are validated by
:func:`crossview.attention.match.match_attention`.

The ops are defined by schema and their CPU kernels registered with ``torch.library.impl``,
not with ``torch.library.custom_op``: that one wraps each kernel so that its first call
imports ``torch._dynamo`` (about 3 s of a 10 s ``crossview stereo`` call on 2 cores), which
an eager run never needs. Under ``torch.compile`` dynamo treats the op as opaque either way.

The GPU backend (:mod:`crossview.attention.match.gpu`) adds its CUDA kernels to these two ops
(``torch.library.register_kernel(..., "cuda")``), keeping their schema, fakes and autograd.
"""

from __future__ import annotations

import torch

from crossview.attention.match.checks import check_finite_rel_pos
from crossview.cpu_kernels import cpu_build

_LIBRARY = torch.library.Library("crossview", "DEF")
_LIBRARY.define("match_attention(Tensor q, Tensor k, Tensor v, Tensor rel_pos, int radius, "
                "bool l1, float scale, bool need_attn) -> (Tensor, Tensor)")
_LIBRARY.define("match_attention_backward(Tensor grad_out, Tensor? grad_attn, Tensor q, "
                "Tensor k, Tensor v, Tensor rel_pos, int radius, bool l1, float scale) "
                "-> (Tensor, Tensor, Tensor, Tensor)")
FORWARD = "crossview::match_attention"
BACKWARD = "crossview::match_attention_backward"


def _match_attention_cpu(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor,
                         rel_pos: torch.Tensor, radius: int, l1: bool, scale: float,
                         need_attn: bool) -> tuple[torch.Tensor, torch.Tensor]:
    """Fused forward: ``out [B, Hq, Wq, h, Cv]`` and the mixed weights
    ``[B, Hq, Wq, h, (2r+2)^2]`` (an empty ``[0]`` tensor unless ``need_attn``)."""
    check_finite_rel_pos(rel_pos)
    out, attn = cpu_build.extension().forward(q, k, v, rel_pos, radius, l1, scale, need_attn)
    return out, attn


def _match_attention_fake(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor,
                          rel_pos: torch.Tensor, radius: int, l1: bool, scale: float,
                          need_attn: bool) -> tuple[torch.Tensor, torch.Tensor]:
    out = q.new_empty((*q.shape[:4], v.shape[-1]))
    attn = q.new_empty((*q.shape[:4], (2 * radius + 2) ** 2) if need_attn else (0,))
    return out, attn


def _match_attention_backward_cpu(grad_out: torch.Tensor, grad_attn: torch.Tensor | None,
                                  q: torch.Tensor, k: torch.Tensor, v: torch.Tensor,
                                  rel_pos: torch.Tensor, radius: int, l1: bool, scale: float,
                                  ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor,
                                             torch.Tensor]:
    """Fused backward: gradients of q, k, v and rel_pos (same shapes as those inputs)."""
    grad_q, grad_k, grad_v, grad_rel = cpu_build.extension().backward(
        grad_out, grad_attn, q, k, v, rel_pos, radius, l1, scale)
    return grad_q, grad_k, grad_v, grad_rel


def _match_attention_backward_fake(grad_out: torch.Tensor, grad_attn: torch.Tensor | None,
                                   q: torch.Tensor, k: torch.Tensor, v: torch.Tensor,
                                   rel_pos: torch.Tensor, radius: int, l1: bool, scale: float,
                                   ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor,
                                              torch.Tensor]:
    return (torch.empty_like(q), torch.empty_like(k), torch.empty_like(v),
            torch.empty_like(rel_pos))


def setup_context(ctx: torch.autograd.function.FunctionCtx, inputs: tuple, output: tuple) -> None:
    """Keep what the backward needs: the forward's tensors and its (radius, l1, scale)."""
    q, k, v, rel_pos, radius, l1, scale, _ = inputs
    ctx.save_for_backward(q, k, v, rel_pos)
    ctx.params = (radius, l1, scale)


def weights_gradient(grad_attn: torch.Tensor | None) -> torch.Tensor | None:
    """The upstream gradient of the mixed weights, ``None`` if nothing flows through them:
    without ``need_attn`` the weights output is an empty placeholder."""
    return None if grad_attn is None or grad_attn.numel() == 0 else grad_attn


def _backward(ctx: torch.autograd.function.FunctionCtx, grad_out: torch.Tensor,
              grad_attn: torch.Tensor | None) -> tuple:
    q, k, v, rel_pos = ctx.saved_tensors
    grads = match_attention_backward_op(grad_out, weights_gradient(grad_attn), q, k, v, rel_pos,
                                        *ctx.params)
    return (*grads, None, None, None, None)


torch.library.impl(FORWARD, "cpu", _match_attention_cpu, lib=_LIBRARY)
torch.library.register_fake(FORWARD, _match_attention_fake, lib=_LIBRARY)
torch.library.impl(BACKWARD, "cpu", _match_attention_backward_cpu, lib=_LIBRARY)
torch.library.register_fake(BACKWARD, _match_attention_backward_fake, lib=_LIBRARY)
torch.library.register_autograd(FORWARD, _backward, setup_context=setup_context, lib=_LIBRARY)

# the ops, called as functions: (q, k, v, rel_pos, radius, l1, scale, need_attn) ->
# (out, attn); (grad_out, grad_attn, q, k, v, rel_pos, radius, l1, scale) -> the 4 gradients
match_attention_op = torch.ops.crossview.match_attention.default
match_attention_backward_op = torch.ops.crossview.match_attention_backward.default
