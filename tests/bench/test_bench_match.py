from __future__ import annotations

import torch

from crossview.bench.match import (
    bench_layers,
    bench_model,
    peak_rss_above_baseline,
    standard_attention_bytes,
    standard_attention_flops,
)
from crossview.models.transformatcher.model import TransforMatcher


def test_standard_attention_estimate_and_skip_before_allocating() -> None:
    assert standard_attention_bytes(15) == 2 * 8 * 50625**2 * 4
    assert standard_attention_bytes(2) == 2 * 8 * 16**2 * 4 < 100_000 < standard_attention_bytes(3)
    assert standard_attention_flops(3) == 6 * 2 * 2 * 8 * 81**2 * 4
    rows = bench_layers([2, 3], memory_cap=100_000, flop_cap=1e6, repeats=1)
    status = {(r["attention"], r["grid"]): r["status"] for r in rows}
    assert status[("additive", 3)] == "ok"
    assert status[("standard (materialised scores)", 2)] == "ok"
    assert status[("standard (materialised scores)", 3)].startswith("skipped: scores need")
    assert status[("standard (fused SDPA kernel)", 2)] == "ok"
    assert status[("standard (fused SDPA kernel)", 3)].startswith("skipped: 0.00504 GFLOP")
    assert all("median_s" not in r for r in rows if r["status"] != "ok")
    assert all(r["cpu_s"] >= 0 for r in rows if r["status"] == "ok")
    assert len(rows) == 6


def _allocate() -> None:
    x = torch.ones(64, 2**20 // 4)  # 64 MiB, touched
    x.add_(1)


def test_peak_rss_sees_a_large_temporary_even_after_an_earlier_one() -> None:
    _allocate()  # freed memory must not hide the next allocation
    assert peak_rss_above_baseline(_allocate) >= 60 * 2**20
    assert peak_rss_above_baseline(lambda: None) < 8 * 2**20


def test_bench_model_has_a_row_per_case_with_time_and_memory() -> None:
    torch.manual_seed(0)
    rows = bench_model(TransforMatcher(grid=3).eval(), repeats=1)
    assert [row["case"] for row in rows] == [
        "model forward (one direction)", "transfer_keypoints (one direction, keypoints only)",
        "match_pair (both directions + keypoints)"]
    for row in rows:
        assert row["size"] == "48x48" and row["peak_mib"] >= 0
        assert 0 < row["min_s"] <= row["median_s"] and row["cpu_s"] > 0
