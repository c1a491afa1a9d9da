"""Overhead of camera-conditioned attention (PRoPE, GTA) over plain SDPA.

Each method is timed on the same random ``q, k, v`` ``[1, heads, views * patches^2, head_dim]``
in float32, forward alone and forward + backward (gradients of q, k, v), camera transforms
built inside every call. Ratios are taken against plain SDPA within the same run.
"""

from __future__ import annotations

import statistics
from collections.abc import Callable, Sequence
from typing import Any

import torch
import torch.nn.functional as F
from torch import Tensor

from crossview.attention.camera import prope_attention
from crossview.bench.measure import time_call
from crossview.geometry.cameras import random_se3

METHODS = ("sdpa", "prope", "gta")
PATCH_PIXELS = 16


def _attention_fn(method: str, views: int,
                  patches: int) -> Callable[[Tensor, Tensor, Tensor], Tensor]:
    if method == "sdpa":
        return F.scaled_dot_product_attention
    gen = torch.Generator().manual_seed(views)
    viewmats = random_se3(1, views, generator=gen)
    size = patches * PATCH_PIXELS
    Ks = torch.tensor([[size, 0.0, size / 2], [0.0, size, size / 2], [0.0, 0.0, 1.0]])
    Ks = Ks.expand(1, views, 3, 3)
    kwargs: dict[str, Any] = dict(viewmats=viewmats, image_size=(size, size),
                                  patch_grid=(patches, patches), encoding=method)
    if method == "prope":
        kwargs["Ks"] = Ks
    return lambda q, k, v: prope_attention(q, k, v, **kwargs)


def _passes(fn: Callable[..., Tensor],
            qkv: tuple[Tensor, ...]) -> list[tuple[str, Callable[[], None]]]:
    leaves = [x.clone().requires_grad_() for x in qkv]

    def forward() -> None:
        with torch.no_grad():
            fn(*qkv)

    def forward_backward() -> None:
        fn(*leaves).sum().backward()
        for leaf in leaves:
            leaf.grad = None

    return [("forward", forward), ("forward+backward", forward_backward)]


def bench_camera(views: Sequence[int] = (2, 8), patches: int = 32, heads: int = 8,
                 head_dim: int = 64, methods: Sequence[str] = METHODS, repeats: int = 3,
                 on_step: Callable[[str], None] | None = None,
                 flush_denormal: bool = False) -> list[dict[str, Any]]:
    """Time every method for every view count; one row per (views, method, pass).

    With ``flush_denormal`` float32 denormals are flushed to zero while timing: the camera
    transforms widen the range of attention scores, and on CPU the softmax then produces
    denormals whose slow arithmetic is a cost of the inputs, not of the encoding.

    The methods are timed in turn (one warm-up call each, then ``repeats`` rounds of one call
    per method), so a change in machine load between rounds hits all of them alike.
    Rows hold ``views, tokens, method, pass ("forward" or "forward+backward"), median_s,
    min_s, runs, ratio, ratio_min`` (median over the SDPA median of the same views and pass,
    and the same for the fastest runs, which a busy machine disturbs least).
    """
    unknown = set(methods) - set(METHODS)
    if unknown or "sdpa" not in methods:
        raise ValueError(f"methods must include 'sdpa' and come from {METHODS}, got {methods}")
    methods = ["sdpa", *(m for m in methods if m != "sdpa")]
    if not flush_denormal:
        return _bench(views, patches, heads, head_dim, methods, repeats, on_step)
    torch.set_flush_denormal(True)
    try:
        return _bench(views, patches, heads, head_dim, methods, repeats, on_step)
    finally:
        torch.set_flush_denormal(False)  # torch's default


def _bench(views: Sequence[int], patches: int, heads: int, head_dim: int, methods: list[str],
           repeats: int, on_step: Callable[[str], None] | None) -> list[dict[str, Any]]:
    rows: list[dict[str, Any]] = []
    for n_views in views:
        tokens = n_views * patches * patches
        gen = torch.Generator().manual_seed(0)
        q, k, v = torch.randn(3, 1, heads, tokens, head_dim, generator=gen).unbind(0)
        calls = {method: dict(_passes(_attention_fn(method, n_views, patches), (q, k, v)))
                 for method in methods}
        for name in ("forward", "forward+backward"):
            times: dict[str, list[float]] = {method: [] for method in methods}
            for method in methods:
                if on_step is not None:
                    on_step(f"{n_views} views {method} {name}")
                calls[method][name]()
            for _ in range(repeats):
                for method in methods:
                    times[method].append(time_call(calls[method][name], repeats=1,
                                                   warmup=0)["median_s"])
            base_median, base_min = statistics.median(times["sdpa"]), min(times["sdpa"])
            for method in methods:
                median, fastest = statistics.median(times[method]), min(times[method])
                rows.append({"views": n_views, "tokens": tokens, "method": method,
                             "pass": name, "median_s": median, "min_s": fastest,
                             "runs": repeats, "ratio": median / base_median,
                             "ratio_min": fastest / base_min})
    rows.sort(key=lambda r: (r["views"], methods.index(r["method"]), r["pass"]))
    return rows
