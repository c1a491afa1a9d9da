from __future__ import annotations

from crossview.bench.match import bench_layers, peak_rss_above_baseline, standard_attention_bytes


def test_standard_attention_estimate_and_skip_before_allocating() -> None:
    assert standard_attention_bytes(15) == 8 * 50625**2 * 4
    rows = bench_layers([3, 15], memory_cap=2**30, repeats=1)
    by_key = {(r["attention"], r["grid"]): r for r in rows}
    assert by_key[("additive", 15)]["status"] == "ok"  # linear attention at 15^4 runs
    assert by_key[("standard", 3)]["status"] == "ok"
    assert by_key[("standard", 15)]["status"].startswith("skipped: scores need 76.4 GiB")


def test_peak_rss_sees_a_large_temporary() -> None:
    import torch

    def allocate() -> None:
        x = torch.ones(64, 2**20 // 4)  # 64 MiB, touched
        x.add_(1)

    assert peak_rss_above_baseline(allocate) >= 60 * 2**20
