"""The device a MatchAttention benchmark runs on (``--device cpu`` or ``cuda``): the fused backend
there, calls timed to their end on a GPU, and peak memory (ATen's CPU allocations, or
``torch.cuda.max_memory_allocated``)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch

from crossview.attention.match import unavailable_reason
from crossview.bench.measure import peak_cpu_bytes
from crossview.errors import UserError

# The fused MatchAttention backend of each device.
FUSED = {"cpu": "cpu", "cuda": "triton"}


def fused_backend(device: str) -> str:
    """The fused backend for ``--device``; ``UserError`` naming the reason if it cannot run."""
    if device not in FUSED:
        raise UserError(f"--device must be one of {', '.join(FUSED)}, got {device!r}")
    if device == "cuda" and not torch.cuda.is_available():
        raise UserError("--device cuda: torch sees no CUDA GPU (torch.cuda.is_available() is "
                        "False)")
    backend = FUSED[device]
    reason = unavailable_reason(backend, device)
    if reason is not None:
        raise UserError(f"--device {device}: the fused MatchAttention {backend} backend cannot "
                        f"run: {reason}")
    return backend


def synchronized(fn: Callable[[], Any], device: str) -> Callable[[], Any]:
    """``fn`` followed by waiting for the GPU, so that timing it times the kernels (GPU calls
    return as soon as the work is queued)."""
    if device != "cuda":
        return fn

    def run() -> None:
        fn()
        torch.cuda.synchronize()

    return run


def peak_bytes(fn: Callable[[], Any], device: str) -> int:
    """Peak bytes allocated on ``device`` during ``fn()`` above what was live before."""
    if device != "cuda":
        return peak_cpu_bytes(fn)
    torch.cuda.synchronize()
    torch.cuda.reset_peak_memory_stats()
    before = torch.cuda.memory_allocated()
    fn()
    torch.cuda.synchronize()
    return torch.cuda.max_memory_allocated() - before
