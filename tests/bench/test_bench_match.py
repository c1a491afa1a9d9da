from __future__ import annotations

import torch

from crossview.bench.match import bench_layers, peak_rss_above_baseline, standard_attention_bytes


def test_standard_attention_estimate_and_skip_before_allocating() -> None:
    assert standard_attention_bytes(15) == 8 * 50625**2 * 4
    assert standard_attention_bytes(3) == 8 * 81**2 * 4
    rows = bench_layers([2, 3], memory_cap=100_000, repeats=1)
    by_key = {(r["attention"], r["grid"]): r for r in rows}
    assert by_key[("additive", 3)]["status"] == "ok"
    assert by_key[("standard", 2)]["status"] == "ok"
    assert by_key[("standard", 3)]["status"].startswith("skipped: scores need")
    assert "median_s" not in by_key[("standard", 3)]


def _allocate() -> None:
    x = torch.ones(64, 2**20 // 4)  # 64 MiB, touched
    x.add_(1)


def test_peak_rss_sees_a_large_temporary_even_after_an_earlier_one() -> None:
    _allocate()  # freed memory must not hide the next allocation
    assert peak_rss_above_baseline(_allocate) >= 60 * 2**20
    assert peak_rss_above_baseline(lambda: None) < 8 * 2**20
