"""The ``triton`` MatchAttention backend: the fused Triton kernels of
:mod:`crossview.attention.match.gpu_kernels` on CUDA tensors, registered as the CUDA kernels of
the custom ops of :mod:`crossview.attention.match.op` (so autograd, ``torch.compile`` and
``torch.export`` see the same op as on CPU). Needs Triton: ``pip install 'crossview[gpu]'``.

**CPU tensors, for tests.** Under Triton's interpreter (``TRITON_INTERPRET=1`` when Triton is
first imported) the same kernels run on CPU tensors, with numpy; this is how the kernels are
tested on a machine without a GPU. The interpreter is far slower than the ``cpu`` backend, so
``"auto"`` never picks it: it runs only when named (``backend="triton"`` or
``set_backend("triton")``). The custom ops' CPU kernel is the C++ one, so on CPU tensors the
Triton kernels are wired to autograd by :class:`_Interpreted` (the op's own
``setup_context`` and the same kernels, only without the dispatcher).
"""

from __future__ import annotations

import torch

from crossview.attention.match.backend import Backend
from crossview.attention.match.checks import DTYPES, check_finite_rel_pos
from crossview.attention.match.op import (
    BACKWARD,
    FORWARD,
    match_attention_op,
    setup_context,
    weights_gradient,
)

try:
    from crossview.attention.match import gpu_kernels
except ImportError as error:  # Triton is optional: the backend says why it cannot run
    gpu_kernels = None
    IMPORT_FAILURE: str | None = (f"Triton cannot be imported ({error}); install it with "
                                  f"pip install 'crossview[gpu]'")
else:
    IMPORT_FAILURE = None

INTERPRETED = gpu_kernels is not None and gpu_kernels.INTERPRETED


def _unsupported(device: torch.device, dtype: torch.dtype) -> str | None:
    if dtype not in DTYPES:
        return f"dtype {dtype} is not float32, float64, bfloat16 or float16"
    if device.type == "cuda" or (device.type == "cpu" and INTERPRETED):
        return None
    return (f"tensors are on {device.type}, the Triton kernels run on cuda (on cpu only under "
            f"Triton's interpreter, TRITON_INTERPRET=1, for tests)")


def _explicit_only(device: torch.device) -> str | None:
    if device.type == "cpu":
        return ("on cpu the Triton kernels run only under Triton's interpreter, a test mode far "
                "slower than the cpu backend: only when asked for by name (backend='triton')")
    return None


def _missing() -> str | None:
    return IMPORT_FAILURE


def _kernels_forward(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, rel_pos: torch.Tensor,
                     radius: int, l1: bool, scale: float,
                     need_attn: bool) -> tuple[torch.Tensor, torch.Tensor]:
    """The custom op's forward on Triton: rel_pos checked finite inside the op, as on CPU."""
    check_finite_rel_pos(rel_pos)
    return gpu_kernels.forward(q, k, v, rel_pos, radius, l1, scale, need_attn)


class _Interpreted(torch.autograd.Function):
    """The custom op's forward and backward on CPU tensors under Triton's interpreter."""

    forward = staticmethod(_kernels_forward)
    setup_context = staticmethod(setup_context)

    @staticmethod
    def backward(ctx: torch.autograd.function.FunctionCtx, grad_out: torch.Tensor,
                 grad_attn: torch.Tensor | None) -> tuple:
        grads = gpu_kernels.backward(grad_out, weights_gradient(grad_attn), *ctx.saved_tensors,
                                     *ctx.params)
        return (*grads, None, None, None, None)


def _forward(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, rel_pos: torch.Tensor,
             radius: int, similarity: str, scale: float,
             need_attn: bool) -> tuple[torch.Tensor, torch.Tensor]:
    """:attr:`Backend.forward`; without ``need_attn`` the weights are an empty ``[0]`` tensor.
    Raises ``ValueError`` for heads wider than the kernels hold (``gpu_kernels.MAX_CHANNELS``)."""
    gpu_kernels.check_channels(q, v)
    args = (q, k, v, rel_pos, radius, similarity == "l1", scale, need_attn)
    if q.device.type == "cuda":
        return match_attention_op(*args)
    return _Interpreted.apply(*args)


if gpu_kernels is not None:
    torch.library.register_kernel(FORWARD, "cuda", _kernels_forward)
    torch.library.register_kernel(BACKWARD, "cuda", gpu_kernels.backward)

BACKEND = Backend(name="triton", label="fused Triton", unsupported=_unsupported,
                  missing=_missing, forward=_forward, explicit_only=_explicit_only)
