"""The fused ``cpu`` MatchAttention backend: C++ kernels (``csrc/``, built on first use by
:mod:`crossview.cpu_kernels.cpu_build`) run as the custom ops of
:mod:`crossview.attention.match.op`, on CPU tensors in float32, float64 and bfloat16."""

from __future__ import annotations

import torch

from crossview.attention.match.backend import Backend
from crossview.attention.match.op import match_attention_op
from crossview.cpu_kernels import cpu_build

DTYPES = (torch.float32, torch.float64, torch.bfloat16)  # the C++ kernels' (no float16)


def _unsupported(device: torch.device, dtype: torch.dtype) -> str | None:
    if device.type != "cpu":
        return f"tensors are on {device.type}, the fused kernels run on cpu only"
    if dtype not in DTYPES:
        return f"dtype {dtype} is not float32, float64 or bfloat16"
    return None


def _forward(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, rel_pos: torch.Tensor,
             radius: int, similarity: str, scale: float,
             need_attn: bool) -> tuple[torch.Tensor, torch.Tensor]:
    """:attr:`Backend.forward`; without ``need_attn`` the weights are an empty ``[0]`` tensor."""
    return match_attention_op(q, k, v, rel_pos, radius, similarity == "l1", scale, need_attn)


BACKEND = Backend(name="cpu", label="fused cpu", unsupported=_unsupported,
                  missing=cpu_build.unavailable_reason, forward=_forward)
