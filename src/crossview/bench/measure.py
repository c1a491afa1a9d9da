"""Measuring a benchmark: timing a call, its peak CPU memory, the process's peak RSS.

Speed is reported as measured in one run; compare rows of the same run (ratios), since a shared
machine is noisy between runs.
"""

from __future__ import annotations

import gc
import os
import resource
import statistics
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import torch


@contextmanager
def torch_threads(threads: int) -> Iterator[None]:
    """Run the block on ``threads`` torch CPU threads (``0``: leave the count as it is), then
    restore the caller's count, so a benchmark called in-process leaves no trace."""
    previous = torch.get_num_threads()
    if threads > 0:
        torch.set_num_threads(threads)
    try:
        yield
    finally:
        torch.set_num_threads(previous)


def time_call(fn: Callable[[], Any], *, repeats: int = 5, warmup: int = 1,
              min_seconds: float = 0.0) -> dict[str, float]:
    """Time ``fn()`` and return ``{"median_s", "min_s", "runs"}``.

    Runs ``warmup`` untimed calls, then at least ``repeats`` timed calls, continuing until
    ``min_seconds`` of timed work has accumulated (so very fast calls are timed often enough).
    """
    for _ in range(warmup):
        fn()
    times: list[float] = []
    started = time.perf_counter()
    while len(times) < repeats or time.perf_counter() - started < min_seconds:
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return {"median_s": statistics.median(times), "min_s": min(times), "runs": float(len(times))}


def peak_cpu_bytes(fn: Callable[[], Any]) -> int:
    """Peak bytes allocated by ATen on the CPU during ``fn()``, above what was live before.

    From the autograd profiler's memory accounting, which sees every CPU tensor allocation made
    by ATen (C++ extensions using ATen tensors included): each op's own (self) allocations at its
    start, and the ``[memory]`` events (frees outside any op) at their time.
    """
    gc.collect()
    with _without_profiler_notices(), torch.profiler.profile(
            activities=[torch.profiler.ProfilerActivity.CPU], profile_memory=True) as prof:
        fn()
    live = peak = 0
    for event in sorted(prof.events(), key=lambda e: e.time_range.start):
        live += event.cpu_memory_usage if event.name == "[memory]" else \
            event.self_cpu_memory_usage
        peak = max(peak, live)
    return peak


@contextmanager
def _without_profiler_notices() -> Iterator[None]:
    """Drop the ``USDT: ... profiler_start/stop`` lines the profiler library writes to fd 2.

    They come from C++ (kineto), below Python's ``sys.stderr``, so file descriptor 2 is sent to a
    temporary file for the duration; every other line written there is passed on afterwards.
    """
    sys.stderr.flush()
    saved = os.dup(2)
    with tempfile.TemporaryFile(mode="w+b") as captured:
        os.dup2(captured.fileno(), 2)
        try:
            yield
        finally:
            sys.stderr.flush()
            os.dup2(saved, 2)
            os.close(saved)
            captured.seek(0)
            kept = [line for line in captured if not line.startswith(b"USDT:")]
            os.write(2, b"".join(kept))


def peak_rss_bytes() -> int:
    """Peak resident set size of this process so far (Linux reports KiB)."""
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
