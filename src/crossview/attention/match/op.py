"""The fused MatchAttention kernels as PyTorch custom operators (``torch.library``).

``crossview::match_attention`` and ``crossview::match_attention_backward`` run the C++ kernels
of :mod:`crossview.attention.match.cpu_build` on CPU tensors; fake (meta) implementations give
their output shapes, so ``torch.compile`` and ``torch.export`` see one opaque op, and
``register_autograd`` connects the backward kernel. Inputs are validated by
:func:`crossview.attention.match.match_attention`.

The GPU backend (:mod:`crossview.attention.match.gpu`) adds its CUDA kernels to these two ops
(``register_kernel("cuda")``), keeping their schema, fakes and autograd.
"""

from __future__ import annotations

import torch

from crossview.attention.match import cpu_build
from crossview.attention.match.checks import check_finite_rel_pos


@torch.library.custom_op("crossview::match_attention", mutates_args=(), device_types="cpu")
def match_attention_op(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, rel_pos: torch.Tensor,
                       radius: int, l1: bool, scale: float, need_attn: bool,
                       ) -> tuple[torch.Tensor, torch.Tensor]:
    """Fused forward: ``out [B, Hq, Wq, h, Cv]`` and the mixed weights
    ``[B, Hq, Wq, h, (2r+2)^2]`` (an empty ``[0]`` tensor unless ``need_attn``)."""
    check_finite_rel_pos(rel_pos)
    out, attn = cpu_build.extension().forward(q, k, v, rel_pos, radius, l1, scale, need_attn)
    return out, attn


@match_attention_op.register_fake
def _match_attention_fake(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor,
                          rel_pos: torch.Tensor, radius: int, l1: bool, scale: float,
                          need_attn: bool) -> tuple[torch.Tensor, torch.Tensor]:
    out = q.new_empty((*q.shape[:4], v.shape[-1]))
    attn = q.new_empty((*q.shape[:4], (2 * radius + 2) ** 2) if need_attn else (0,))
    return out, attn


@torch.library.custom_op("crossview::match_attention_backward", mutates_args=(),
                         device_types="cpu")
def match_attention_backward_op(grad_out: torch.Tensor, grad_attn: torch.Tensor | None,
                                q: torch.Tensor, k: torch.Tensor, v: torch.Tensor,
                                rel_pos: torch.Tensor, radius: int, l1: bool, scale: float,
                                ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
    """Fused backward: gradients of q, k, v and rel_pos (same shapes as those inputs)."""
    grad_q, grad_k, grad_v, grad_rel = cpu_build.extension().backward(
        grad_out, grad_attn, q, k, v, rel_pos, radius, l1, scale)
    return grad_q, grad_k, grad_v, grad_rel


@match_attention_backward_op.register_fake
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


match_attention_op.register_autograd(_backward, setup_context=setup_context)
