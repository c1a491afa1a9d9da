"""Speed and memory of MatchAttention: the fused kernels (``cpu``, or ``triton`` with
``device="cuda"``) against the reference backend and SDPA.

Every case is self-attention on a square token grid, ``[1, n, n, heads, channels]`` float32,
with ``rel_pos`` drawn uniformly in ``[-4, 4)`` tokens and shared by the heads (the
cross-attention layout). In the same run the memory bandwidth of a plain tensor copy is
measured; the operator's bandwidth bound is the time to read q, k, v and rel_pos once and
write out once at that bandwidth. Ratios are taken within the run (the machine is shared).
On a GPU every timed call waits for the kernels to finish and peak memory is
``torch.cuda.max_memory_allocated`` (:mod:`crossview.bench.device`).

**Time per query and head against this machine's roof.** The same run also measures the
float32 GEMM rate ``G`` (``torch.matmul`` of two :data:`GEMM_SIZE`-square matrices, ``2 n^3``
floating-point operations each, on all of torch's threads) and the copy bandwidth ``B``. The fused
forward's time per query and head is ``t = fused forward time / (tokens * heads)`` and its bound

    bound = max(F / G, M / B),
    F = (2r+2)^2 * (s * C + 2 * Cv)       floating-point operations per query and head
    M = 4 * (2 * C + 2 * Cv) + 4 * 2 / h  bytes per query and head (float32)

with ``s = 3`` for the L1 similarity (subtract, absolute value, add per channel; ``2`` for a dot
product: multiply, add) over the ``(2r+2)^2`` keys of the expanded window, ``2 * Cv`` for
aggregating the values (multiply, add), and ``M`` the traffic no kernel avoids: reading the
query, its key and its value once (each key and value belongs to about one query's window on
average), writing the output, and the ``rel_pos`` pair shared by the ``h`` heads. 4 heads x 64
channels: ``F = 5120`` (r = 1) or ``11520`` (r = 2), ``M = 1026`` bytes. The exponentials of the
softmax (``(2r+2)^2`` per query and head) and the window's bookkeeping are left out, and ``G`` is
the rate of fused multiply-adds, which the L1 distance cannot use: the bound is a floor, not a
target. ``fwd/roof`` (``t / bound``) is what to watch for a regression.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import torch
import torch.nn.functional as F

from crossview.attention.match import match_attention
from crossview.bench.device import fused_backend, peak_bytes, synchronized
from crossview.bench.measure import time_call
from crossview.cpu_kernels import cpu_build
from crossview.lazy import lazy_import
from crossview.output import atomic_output

# pyplot-free figures (savefig renders with Agg, no global backend); ~0.3 s to import:
# loaded when a figure is drawn
figures = lazy_import("matplotlib.figure")

SIZES = (64, 128, 256, 512)
QUICK_SIZES = (32, 64)
RADII = (1, 2)
HEADS, CHANNELS = 4, 64
REFERENCE_MAX_GATHER_BYTES = 700 * 2**20  # one gathered window tensor; beyond: skipped
SDPA_MAX_SECONDS = 10.0  # estimated from the previous size (O(N^2)); beyond: skipped
COPY_BYTES = 256 * 2**20
GEMM_SIZE = 2048  # the matrices whose float32 matmul rate is the compute roof
MIN_SECONDS = 0.5  # fused calls are repeated until this much timed work has accumulated
MIB = 2**20

SPEED_COLUMNS = ["tokens", "r", "fused fwd", "fused f+b", "ref fwd", "ref f+b", "SDPA fwd",
                 "fwd x", "f+b x"]
ROOF_COLUMNS = ["tokens", "r", "fwd ns/q·h", "roof ns/q·h", "fwd/roof", "flop/q·h", "bytes/q·h",
                "bound by"]
MEMORY_COLUMNS = ["tokens", "r", "bound ms", "fwd/bound", "ns/token", "out", "fused fwd",
                  "fused f+b", "ref fwd"]


def copy_bandwidth(nbytes: int, repeats: int = 5, device: str = "cpu") -> float:
    """Bytes per second moved by ``y.copy_(x)`` (read + write) for ``nbytes``-sized tensors on
    ``device``, from the median time like every other timing here."""
    x = torch.ones(nbytes // 4, device=device)
    y = torch.empty_like(x)
    timing = time_call(synchronized(lambda: y.copy_(x), device), repeats=repeats, warmup=1)
    return 2 * nbytes / timing["median_s"]


def gemm_rate(size: int = GEMM_SIZE, repeats: int = 3, device: str = "cpu") -> float:
    """Floating-point operations per second of ``torch.matmul`` on two ``size x size`` float32
    matrices on ``device`` (``2 size^3`` per product), from the median time."""
    gen = torch.Generator().manual_seed(0)
    a, b = (torch.randn(size, size, generator=gen).to(device) for _ in range(2))
    timing = time_call(synchronized(lambda: torch.matmul(a, b), device), repeats=repeats,
                       warmup=1)
    return 2 * size**3 / timing["median_s"]


def flops_per_query_head(radius: int, channels: int = CHANNELS,
                         value_channels: int = CHANNELS, similarity: str = "l1") -> int:
    """``F`` of the module docstring: the fused forward's floating-point operations per query
    and head (scores over the expanded window, then the values' weighted sum)."""
    per_channel = 3 if similarity == "l1" else 2
    return (2 * radius + 2) ** 2 * (per_channel * channels + 2 * value_channels)


def bytes_per_query_head(channels: int = CHANNELS, value_channels: int = CHANNELS,
                         heads: int = HEADS, rel_pos_heads: int = 1,
                         itemsize: int = 4) -> float:
    """``M`` of the module docstring: the bytes per query and head no forward avoids (q, k, v
    read and out written once, ``rel_pos`` shared by ``heads / rel_pos_heads`` heads)."""
    return itemsize * (2 * channels + 2 * value_channels + 2 * rel_pos_heads / heads)


def roof_ns_per_query_head(radius: int, flop_rate: float, bandwidth: float) -> dict[str, Any]:
    """The fused forward's floor per query and head for this benchmark's cases (4 heads x 64
    channels, L1, float32, shared ``rel_pos``) at ``flop_rate`` (FLOP/s) and ``bandwidth``
    (B/s): ``{"flops", "bytes", "compute_ns", "memory_ns", "ns", "bound_by"}``."""
    flops, moved = flops_per_query_head(radius), bytes_per_query_head()
    compute_ns, memory_ns = flops / flop_rate * 1e9, moved / bandwidth * 1e9
    return {"flops": flops, "bytes": moved, "compute_ns": compute_ns, "memory_ns": memory_ns,
            "ns": max(compute_ns, memory_ns),
            "bound_by": "compute" if compute_ns >= memory_ns else "memory"}


def _inputs(size: int, device: str, seed: int = 0) -> list[torch.Tensor]:
    gen = torch.Generator().manual_seed(seed)
    q, k, v = (torch.randn(1, size, size, HEADS, CHANNELS, generator=gen) for _ in range(3))
    rel_pos = (torch.rand(1, size, size, 1, 2, generator=gen) - 0.5) * 8
    return [t.to(device) for t in (q, k, v, rel_pos)]


def _forward(inputs: list[torch.Tensor], radius: int, backend: str) -> Callable[[], Any]:
    def run() -> None:
        with torch.no_grad():
            match_attention(*inputs, radius, backend=backend)

    return run


def _forward_backward(inputs: list[torch.Tensor], radius: int,
                      backend: str) -> Callable[[], Any]:
    leaves = [t.clone().requires_grad_() for t in inputs]
    grad_out = torch.randn_like(inputs[2])

    def run() -> None:
        match_attention(*leaves, radius, backend=backend).backward(grad_out)
        for leaf in leaves:
            leaf.grad = None

    return run


def _sdpa(inputs: list[torch.Tensor]) -> Callable[[], Any]:
    q, k, v = (t.flatten(1, 2).transpose(1, 2).contiguous() for t in inputs[:3])

    def run() -> None:
        with torch.no_grad():
            F.scaled_dot_product_attention(q, k, v)

    return run


def bench_case(size: int, radius: int, *, bandwidth: float, repeats: int, reference: bool,
               sdpa: bool, device: str = "cpu", fused: str = "cpu",
               flop_rate: float | None = None) -> dict[str, Any]:
    """One row: timings (seconds), peak bytes and the bandwidth bound for ``size^2`` tokens on
    ``device``, the fused backend being ``fused``; with ``flop_rate`` (the GEMM rate) also the
    fused forward's ns per query and head and its roof (:func:`roof_ns_per_query_head`)."""
    inputs = _inputs(size, device)
    tokens = size * size
    out_bytes = tokens * HEADS * CHANNELS * 4
    moved = sum(t.numel() * t.element_size() for t in inputs) + out_bytes
    row: dict[str, Any] = {"size": size, "tokens": tokens, "radius": radius,
                           "out_bytes": out_bytes, "bound_s": moved / bandwidth}
    fwd = synchronized(_forward(inputs, radius, fused), device)
    timing = time_call(fwd, repeats=repeats, min_seconds=MIN_SECONDS)
    row["fused_fwd_s"], row["fused_fwd_min_s"] = timing["median_s"], timing["min_s"]
    row["fused_fwd_ns_per_query_head"] = timing["median_s"] / (tokens * HEADS) * 1e9
    if flop_rate is not None:
        roof = roof_ns_per_query_head(radius, flop_rate, bandwidth)
        row["roof_ns_per_query_head"] = roof["ns"]
        row["roof"] = roof
    row["fused_fwd_peak_bytes"] = peak_bytes(fwd, device)
    fwd_bwd = synchronized(_forward_backward(inputs, radius, fused), device)
    row["fused_fwd_bwd_s"] = time_call(fwd_bwd, repeats=repeats,
                                       min_seconds=MIN_SECONDS)["median_s"]
    row["fused_fwd_bwd_peak_bytes"] = peak_bytes(fwd_bwd, device)
    if reference:
        ref = synchronized(_forward(inputs, radius, "reference"), device)
        row["ref_fwd_s"] = time_call(ref, repeats=max(1, repeats // 2), warmup=0)["median_s"]
        row["ref_fwd_peak_bytes"] = peak_bytes(ref, device)
        ref_bwd = synchronized(_forward_backward(inputs, radius, "reference"), device)
        row["ref_fwd_bwd_s"] = time_call(ref_bwd, repeats=max(1, repeats // 2),
                                         warmup=0)["median_s"]
    if sdpa:
        sdpa_fwd = synchronized(_sdpa(inputs), device)
        row["sdpa_fwd_s"] = time_call(sdpa_fwd, repeats=max(1, repeats // 2),
                                      warmup=0)["median_s"]
        row["sdpa_fwd_peak_bytes"] = peak_bytes(sdpa_fwd, device)
    return row


def reference_gather_bytes(size: int, radius: int) -> int:
    """Bytes of one ``[N, heads, (2r+2)^2, C]`` window gather of the reference backend."""
    return size * size * HEADS * (2 * radius + 2) ** 2 * CHANNELS * 4


def bench_attention(sizes: Sequence[int] = SIZES, radii: Sequence[int] = RADII, *,
                    repeats: int = 5, on_step: Callable[[str], None] | None = None,
                    device: str = "cpu") -> dict[str, Any]:
    """Run every (size, radius) case on ``device`` (``"cpu"`` or ``"cuda"``; ``UserError`` if
    its fused backend cannot run); returns ``{"device", "fused_backend", "copy_bandwidth_Bps",
    "rows", "skipped", "summary"}`` (rows hold seconds and bytes)."""
    fused = fused_backend(device)
    bandwidth = copy_bandwidth(COPY_BYTES, device=device)
    flop_rate = gemm_rate(device=device)
    rows: list[dict[str, Any]] = []
    skipped: list[str] = []
    sdpa_last: tuple[int, float] | None = None
    for size in sizes:
        for radius in radii:
            if on_step is not None:
                on_step(f"{size}² tokens, r={radius}")
            reference = reference_gather_bytes(size, radius) <= REFERENCE_MAX_GATHER_BYTES
            if not reference:
                skipped.append(f"reference at {size}² r={radius}: one window gather alone "
                               f"needs {reference_gather_bytes(size, radius) / 2**30:.1f} GiB")
            sdpa = radius == radii[0]
            if sdpa and sdpa_last is not None:
                estimate = sdpa_last[1] * (size / sdpa_last[0]) ** 4
                if estimate > SDPA_MAX_SECONDS:
                    skipped.append(f"SDPA at {size}²: global attention is O(N²), about "
                                   f"{estimate:.0f} s per call estimated from {sdpa_last[0]}²")
                    sdpa = False
            row = bench_case(size, radius, bandwidth=bandwidth, repeats=repeats,
                             reference=reference, sdpa=sdpa, device=device, fused=fused,
                             flop_rate=flop_rate)
            if "sdpa_fwd_s" in row:
                sdpa_last = (size, row["sdpa_fwd_s"])
            rows.append(row)
    # the fused CPU kernels' compile flags: -march says which SIMD the timings are of
    build = {"cpu_cflags": list(cpu_build.cflags())} if fused == "cpu" else {}
    return {"device": device, "fused_backend": fused, "copy_bandwidth_Bps": bandwidth,
            "gemm_flops_per_s": flop_rate, "threads": torch.get_num_threads(), **build,
            "heads": HEADS, "channels": CHANNELS,
            "dtype": "float32", "rows": rows, "skipped": skipped, "summary": summarize(rows)}


def summarize(rows: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """Targets of the operator: speed-ups, distance to the bandwidth bound, linear scaling,
    forward+backward over forward, whether the fused forward allocates no more than its output
    and its peak over the output (the GPU target: within 2x)."""
    summary: dict[str, Any] = {}
    for radius in sorted({row["radius"] for row in rows}):
        mine = [row for row in rows if row["radius"] == radius]
        per_token = [row["fused_fwd_s"] / row["tokens"] for row in mine]
        summary[f"r{radius}"] = {
            "fwd_speedup": {row["size"]: row["ref_fwd_s"] / row["fused_fwd_s"]
                            for row in mine if "ref_fwd_s" in row},
            "fwd_bwd_speedup": {row["size"]: row["ref_fwd_bwd_s"] / row["fused_fwd_bwd_s"]
                                for row in mine if "ref_fwd_bwd_s" in row},
            "fwd_over_bound": {row["size"]: row["fused_fwd_s"] / row["bound_s"] for row in mine},
            "per_token_max_over_min": max(per_token) / min(per_token),
            "fwd_allocates_only_output": all(row["fused_fwd_peak_bytes"] <= row["out_bytes"]
                                             for row in mine),
            "fwd_peak_over_output": {row["size"]: row["fused_fwd_peak_bytes"] / row["out_bytes"]
                                     for row in mine},
            "fwd_bwd_over_fwd": {row["size"]: row["fused_fwd_bwd_s"] / row["fused_fwd_s"]
                                 for row in mine},
            "fwd_ns_per_query_head": {row["size"]: row["fused_fwd_ns_per_query_head"]
                                      for row in mine},
            "fwd_over_roof": {row["size"]: row["fused_fwd_ns_per_query_head"]
                              / row["roof_ns_per_query_head"]
                              for row in mine if "roof_ns_per_query_head" in row},
        }
    return summary


def _scaled(row: dict[str, Any], key: str, factor: float) -> str:
    return f"{row[key] * factor:.1f}" if key in row else "-"


def _ratio(row: dict[str, Any], top: str, bottom: str) -> str:
    return f"{row[top] / row[bottom]:.1f}" if top in row and bottom in row else "-"


def speed_rows(result: dict[str, Any]) -> list[list[Any]]:
    """Rows of :data:`SPEED_COLUMNS` (median milliseconds, speed-ups reference / fused); ``-``
    where a case was skipped."""
    return [[f"{row['size']}²", row["radius"], *(_scaled(row, key, 1e3) for key in (
             "fused_fwd_s", "fused_fwd_bwd_s", "ref_fwd_s", "ref_fwd_bwd_s", "sdpa_fwd_s")),
             _ratio(row, "ref_fwd_s", "fused_fwd_s"),
             _ratio(row, "ref_fwd_bwd_s", "fused_fwd_bwd_s")] for row in result["rows"]]


def roof_rows(result: dict[str, Any]) -> list[list[Any]]:
    """Rows of :data:`ROOF_COLUMNS`: the fused forward's ns per query and head (median, all
    threads), the roof of the module docstring, their ratio, the roof's operations and bytes per
    query and head, and which of the two sets it."""
    return [[f"{row['size']}²", row["radius"], f"{row['fused_fwd_ns_per_query_head']:.0f}",
             f"{row['roof']['ns']:.0f}",
             f"{row['fused_fwd_ns_per_query_head'] / row['roof']['ns']:.1f}",
             row["roof"]["flops"], f"{row['roof']['bytes']:.0f}", row["roof"]["bound_by"]]
            for row in result["rows"] if "roof" in row]


def memory_rows(result: dict[str, Any]) -> list[list[Any]]:
    """Rows of :data:`MEMORY_COLUMNS`: bandwidth bound (ms), fused forward time over it, fused
    forward ns per token, then output size and peak allocations (MiB)."""
    return [[f"{row['size']}²", row["radius"], _scaled(row, "bound_s", 1e3),
             _ratio(row, "fused_fwd_s", "bound_s"),
             f"{row['fused_fwd_s'] / row['tokens'] * 1e9:.0f}",
             *(_scaled(row, key, 1 / MIB) for key in (
                 "out_bytes", "fused_fwd_peak_bytes", "fused_fwd_bwd_peak_bytes",
                 "ref_fwd_peak_bytes"))] for row in result["rows"]]


def plot_attention(result: dict[str, Any], path: str | Path) -> Path:
    """Latency and peak memory against token count (log-log), written atomically as PNG
    (into an existing directory)."""
    fig = figures.Figure(figsize=(11, 4.2))
    latency, memory = fig.subplots(1, 2)
    series = [("bandwidth bound", "bound_s", "out_bytes", "0.6"),
              ("fused fwd", "fused_fwd_s", "fused_fwd_peak_bytes", "C0"),
              ("fused fwd+bwd", "fused_fwd_bwd_s", "fused_fwd_bwd_peak_bytes", "C1"),
              ("reference fwd", "ref_fwd_s", "ref_fwd_peak_bytes", "C2"),
              ("SDPA global fwd", "sdpa_fwd_s", None, "C3")]
    for radius, style in zip(sorted({r["radius"] for r in result["rows"]}), ("-o", "--s"),
                             strict=False):
        rows = [r for r in result["rows"] if r["radius"] == radius]
        for label, time_key, mem_key, colour in series:
            points = [(r["tokens"], r[time_key]) for r in rows if time_key in r]
            if points:
                latency.plot(*zip(*[(t, s * 1e3) for t, s in points], strict=True), style,
                             color=colour, label=f"{label}, r={radius}")
            points = [(r["tokens"], r[mem_key]) for r in rows if mem_key and mem_key in r]
            if points:
                name = "output size (= fused fwd peak)" if mem_key == "out_bytes" else label
                memory.plot(*zip(*[(t, b / MIB) for t, b in points], strict=True), style,
                            color=colour, label=f"{name}, r={radius}")
    for axis, unit in ((latency, "latency (ms)"), (memory, "peak allocated (MiB)")):
        axis.set_xscale("log", base=2)
        axis.set_yscale("log")
        axis.set_xlabel("tokens")
        axis.set_ylabel(unit)
        axis.grid(True, which="both", alpha=0.3)
    latency.legend(fontsize=7)
    memory.legend(fontsize=7)
    where = (f"{torch.get_num_threads()} CPU threads" if result.get("device", "cpu") == "cpu"
             else f"{result['device']}, {result['fused_backend']} backend")
    fig.suptitle(f"MatchAttention, {HEADS} heads x {CHANNELS} ch, float32, {where}")
    fig.tight_layout()
    path = Path(path)
    with atomic_output(path) as tmp:
        fig.savefig(tmp, format="png", dpi=110)
    return path
