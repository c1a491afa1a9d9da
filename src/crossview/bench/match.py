"""``crossview bench match``: match-to-match attention and the whole TransforMatcher.

- The refinement's attention layers (6 match-to-match layers, 16 channels, 8 heads x 4) on a
  correlation of ``g^4`` matches: additive attention (linear in ``T = g^4``) and standard
  softmax attention, once with materialised ``heads x T x T`` scores (quadratic memory and
  time) and once through torch's fused SDPA kernel (linear memory, quadratic time). Each
  standard case is estimated first and only run under ``memory_cap`` bytes / ``flop_cap``;
  larger sizes are reported as skipped with the estimate, so the benchmark never exhausts the
  shared machine.
- The whole model per 240 x 240 image pair: backbone, correlation, refinement, 4D upsampling and
  kernel soft-argmax (one direction), ``transfer_keypoints`` (one direction, keypoints only, as
  ``crossview eval`` on PF-WILLOW) and ``match_pair`` (both directions, as ``crossview match``).
"""

from __future__ import annotations

import ctypes
import ctypes.util
import gc
import time
from collections.abc import Callable
from contextlib import nullcontext
from typing import Any

import torch
from torch.nn.attention import SDPBackend, sdpa_kernel

from crossview.bench.measure import time_call
from crossview.models.keypoints.inference import match_pair
from crossview.models.transformatcher.inference import transfer_keypoints
from crossview.models.transformatcher.model import MatchRefiner, TransforMatcher

CHANNELS = 11  # EfficientNet-Lite0 correlation layers
_M_TRIM_THRESHOLD, _M_MMAP_THRESHOLD = -1, -3  # glibc mallopt parameters
# What glibc's dynamic thresholds grow to in a long-running process (the mmap threshold's
# maximum on 64-bit, and twice it for trimming).
_WARM_MMAP_THRESHOLD, _WARM_TRIM_THRESHOLD = 32 * 2**20, 64 * 2**20


def _status_bytes(field: str) -> int:
    with open("/proc/self/status") as status:
        for line in status:
            if line.startswith(field + ":"):
                return int(line.split()[1]) * 1024
    raise RuntimeError(f"/proc/self/status has no {field}")


def _libc() -> ctypes.CDLL:
    return ctypes.CDLL(ctypes.util.find_library("c"))


def _return_freed_memory() -> None:
    """Make glibc map every block of 128 KiB or more on its own and unmap it when freed (a fixed
    threshold turns off its dynamic one), and trim the heap: freed tensors then leave the
    resident set, so the next high-water mark measures new allocations."""
    libc = _libc()
    libc.mallopt(_M_MMAP_THRESHOLD, 128 * 1024)
    libc.malloc_trim(0)


def _reuse_freed_memory() -> None:
    """Undo :func:`_return_freed_memory` for the timings that follow: blocks up to 32 MiB come
    from the heap again and freed ones are kept for reuse, as in a warmed-up process with glibc's
    dynamic thresholds (mapping and unmapping every temporary made forwards ~30 % slower)."""
    libc = _libc()
    libc.mallopt(_M_MMAP_THRESHOLD, _WARM_MMAP_THRESHOLD)
    libc.mallopt(_M_TRIM_THRESHOLD, _WARM_TRIM_THRESHOLD)


def peak_rss_above_baseline(fn: Callable[[], Any]) -> int:
    """Peak resident memory during ``fn()`` above the resident memory before it (Linux:
    resets the high-water mark through ``/proc/self/clear_refs``). This sees every allocation,
    including the large score matrices that glibc maps and unmaps directly. Afterwards the
    allocator is set back to reusing freed memory, so later timings are not slowed down."""
    gc.collect()
    _return_freed_memory()
    baseline = _status_bytes("VmRSS")
    with open("/proc/self/clear_refs", "w") as refs:
        refs.write("5")
    try:
        fn()
        return max(0, _status_bytes("VmHWM") - baseline)
    finally:
        _reuse_freed_memory()


def time_wall_and_cpu(fn: Callable[[], Any], repeats: int) -> dict[str, float]:
    """:func:`~crossview.bench.measure.time_call` (one warm-up call) plus ``cpu_s``, the mean
    process CPU time per timed call (all threads; on a shared machine this, not the wall time,
    is what the call costs)."""
    fn()
    cpu = time.process_time()
    timing = time_call(fn, repeats=repeats, warmup=0)
    return {**timing, "cpu_s": (time.process_time() - cpu) / timing["runs"]}


def standard_attention_bytes(grid: int, heads: int = 8, batch: int = 1) -> int:
    """Bytes of standard attention's float32 ``[batch, heads, T, T]`` scores and their softmax,
    which exist together (measured: 2.96 GiB peak at 9^4 for this 2.75 GiB estimate)."""
    tokens = grid**4
    return 2 * batch * heads * tokens * tokens * 4


def standard_attention_flops(grid: int, heads: int = 8, head_dim: int = 4,
                             depth: int = 6) -> int:
    """Multiply-adds x 2 of the ``QK^T`` and ``PV`` products of ``depth`` standard layers."""
    tokens = grid**4
    return depth * 2 * 2 * heads * tokens * tokens * head_dim


# (name, attention kind of the layers, SDPA backend or None)
VARIANTS = (("additive", "additive", None),
            ("standard (materialised scores)", "standard", SDPBackend.MATH),
            ("standard (fused SDPA kernel)", "standard", SDPBackend.FLASH_ATTENTION))


def _skip_reason(backend: SDPBackend | None, grid: int, memory_cap: float,
                 flop_cap: float) -> str | None:
    if backend == SDPBackend.MATH and standard_attention_bytes(grid) > memory_cap:
        return (f"skipped: scores need {standard_attention_bytes(grid) / 2**30:.1f} GiB "
                f"> cap {memory_cap / 2**30:.1f} GiB")
    if backend == SDPBackend.FLASH_ATTENTION and standard_attention_flops(grid) > flop_cap:
        return (f"skipped: {standard_attention_flops(grid) / 1e9:.3g} GFLOP "
                f"> cap {flop_cap / 1e9:.3g} GFLOP")
    return None


def bench_layers(grids: list[int], *, memory_cap: float, flop_cap: float, repeats: int,
                 on_step: Callable[[str], None] | None = None) -> list[dict[str, Any]]:
    """Forward time and peak memory of the refinement layers for each grid and variant.

    Standard attention runs through torch's SDPA with a forced backend: the math backend
    materialises the ``heads x T x T`` scores (guarded by ``memory_cap`` bytes), the fused
    kernel does not, but its time stays quadratic (guarded by ``flop_cap``)."""
    rows = []
    for name, attention, backend in VARIANTS:
        torch.manual_seed(0)
        refiner = MatchRefiner(CHANNELS, attention=attention).eval()
        for grid in grids:
            if on_step is not None:
                on_step(f"{name} {grid}^4")
            tokens = grid**4
            row: dict[str, Any] = {"attention": name, "grid": grid, "matches": tokens}
            reason = _skip_reason(backend, grid, memory_cap, flop_cap)
            if reason is not None:
                rows.append({**row, "status": reason})
                continue
            corr = torch.rand(1, CHANNELS, grid, grid, grid, grid)

            def run(refiner: MatchRefiner = refiner, corr: torch.Tensor = corr,
                    backend: SDPBackend | None = backend) -> None:
                kernel = sdpa_kernel(backend) if backend is not None else nullcontext()
                with torch.inference_mode(), kernel:
                    refiner(corr)

            timing = time_wall_and_cpu(run, repeats)
            peak = peak_rss_above_baseline(run)
            rows.append({**row, "status": "ok", "median_s": timing["median_s"],
                         "min_s": timing["min_s"], "cpu_s": timing["cpu_s"],
                         "peak_mib": peak / 2**20,
                         "us_per_match": 1e6 * timing["median_s"] / tokens,
                         "bytes_per_match": peak / tokens})
    return rows


def bench_model(model: TransforMatcher, repeats: int) -> list[dict[str, Any]]:
    """Seconds per 240 x 240 pair: one forward, ``transfer_keypoints`` (one direction, keypoints
    only: what ``crossview eval`` runs per benchmark pair) and ``match_pair`` (both directions
    and dense flows: ``crossview match``)."""
    size = model.image_size
    gen = torch.Generator().manual_seed(0)
    src, tgt = (torch.rand(1, 3, size, size, generator=gen) * 255 for _ in range(2))
    points = torch.rand(16, 2, generator=gen) * (size - 1)
    cases: dict[str, Callable[[], Any]] = {
        "model forward (one direction)": lambda: model(src, tgt),
        "transfer_keypoints (one direction, keypoints only)":
            lambda: transfer_keypoints(model, src, tgt, points),
        "match_pair (both directions + keypoints)": lambda: match_pair(model, src, tgt, points),
    }
    rows = []
    model.eval()
    for name, fn in cases.items():
        def run(fn: Callable[[], Any] = fn) -> None:
            with torch.inference_mode():
                fn()

        timing = time_wall_and_cpu(run, repeats)
        rows.append({"case": name, "size": f"{size}x{size}", "median_s": timing["median_s"],
                     "min_s": timing["min_s"], "cpu_s": timing["cpu_s"],
                     "peak_mib": peak_rss_above_baseline(run) / 2**20})
    return rows
