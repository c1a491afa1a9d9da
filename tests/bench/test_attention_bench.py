"""Smoke run of ``crossview bench attention`` on a tiny grid: JSON structure and the plot, never
a time."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from crossview.attention.match import unavailable_reason
from crossview.bench import attention
from crossview.cli.app import main
from crossview.cpu_kernels import cpu_build

pytestmark = pytest.mark.skipif(cpu_build.unavailable_reason() is not None,
                                reason=f"{cpu_build.unavailable_reason()}")


def test_quick_bench_writes_json_and_plot(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                          capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setattr(attention, "QUICK_SIZES", (4, 6))
    monkeypatch.setattr(attention, "COPY_BYTES", 2**20)
    monkeypatch.setattr(attention, "GEMM_SIZE", 64)
    monkeypatch.setattr(attention, "MIN_SECONDS", 0.0)
    json_path, plot_path = tmp_path / "attention.json", tmp_path / "attention.png"
    with pytest.raises(SystemExit) as done:
        main(["bench", "attention", "--quick", "--repeats", "1", "--json", str(json_path),
              "--plot", str(plot_path)])
    assert done.value.code in (0, None)
    result = json.loads(json_path.read_text())
    assert result["benchmark"] == "attention" and result["copy_bandwidth_Bps"] > 0
    assert [(row["size"], row["radius"]) for row in result["rows"]] == [(4, 1), (6, 1)]
    for row in result["rows"]:
        assert row["tokens"] == row["size"] ** 2
        assert row["out_bytes"] == row["tokens"] * 4 * 64 * 4
        for key in ("fused_fwd_s", "fused_fwd_bwd_s", "ref_fwd_s", "ref_fwd_bwd_s", "sdpa_fwd_s",
                    "bound_s"):
            assert row[key] > 0, key
        # The fused forward allocates exactly its output; the reference gathers windows.
        assert row["fused_fwd_peak_bytes"] == row["out_bytes"]
        assert row["ref_fwd_peak_bytes"] > row["out_bytes"]
    assert result["summary"]["r1"]["fwd_allocates_only_output"] is True
    assert plot_path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    printed = capsys.readouterr().out
    assert "MatchAttention, 4 heads x 64 ch" in printed
    # The roof row: ns per query and head next to the bound from this run's GEMM rate and
    # bandwidth (values depend on the machine: only their presence and consistency here).
    assert result["gemm_flops_per_s"] > 0 and result["threads"] >= 1
    assert any(flag.startswith("-march=") for flag in result["cpu_cflags"])
    assert "against the roof" in printed
    for row in result["rows"]:
        assert row["fused_fwd_ns_per_query_head"] == pytest.approx(
            row["fused_fwd_s"] / (row["tokens"] * 4) * 1e9)
        assert row["roof"] == attention.roof_ns_per_query_head(
            1, result["gemm_flops_per_s"], result["copy_bandwidth_Bps"])
        assert row["roof_ns_per_query_head"] == row["roof"]["ns"] > 0
    assert set(result["summary"]["r1"]["fwd_over_roof"]) == {"4", "6"}


def test_sizes_can_be_chosen(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(attention, "COPY_BYTES", 2**20)
    monkeypatch.setattr(attention, "GEMM_SIZE", 64)
    monkeypatch.setattr(attention, "MIN_SECONDS", 0.0)
    json_path = tmp_path / "attention.json"
    with pytest.raises(SystemExit) as done:
        main(["bench", "attention", "--quick", "--size", "5", "--repeats", "1", "--json",
              str(json_path)])
    assert done.value.code in (0, None)
    assert [row["size"] for row in json.loads(json_path.read_text())["rows"]] == [5]


def test_a_size_smaller_than_the_window_is_refused(tmp_path: Path,
                                                   capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as done:
        main(["bench", "attention", "--size", "5", "--json", str(tmp_path / "a.json")])
    assert done.value.code == 2  # r = 2 is in the full grid: a 6x6 window
    assert "--size must be at least 6" in capsys.readouterr().err


def test_the_roof_per_query_and_head_by_hand() -> None:
    # 4 heads x 64 channels, r = 1: 16 keys x (3 x 64 for the L1 score + 2 x 64 to aggregate).
    assert attention.flops_per_query_head(1) == 16 * (3 * 64 + 2 * 64) == 5120
    assert attention.flops_per_query_head(2) == 36 * 320 == 11520
    assert attention.flops_per_query_head(1, similarity="dot") == 16 * (2 * 64 + 2 * 64)
    assert attention.flops_per_query_head(1, channels=32, value_channels=16) == 16 * (96 + 32)
    # q, k, v read and out written once (4 x 64 float32 each), 2 rel_pos floats over 4 heads.
    assert attention.bytes_per_query_head() == 4 * 64 * 4 + 2 * 4 / 4 == 1026
    assert attention.bytes_per_query_head(heads=4, rel_pos_heads=4) == 1024 + 8
    # 100 GFLOP/s and 10 GB/s: 51.2 ns of arithmetic, 102.6 ns of traffic; the larger wins.
    roof = attention.roof_ns_per_query_head(1, flop_rate=100e9, bandwidth=10e9)
    assert roof["compute_ns"] == pytest.approx(51.2)
    assert roof["memory_ns"] == pytest.approx(102.6)
    assert roof["ns"] == pytest.approx(102.6) and roof["bound_by"] == "memory"
    roof = attention.roof_ns_per_query_head(2, flop_rate=50e9, bandwidth=100e9)
    assert roof["ns"] == pytest.approx(11520 / 50) and roof["bound_by"] == "compute"


def test_the_gemm_rate_counts_two_n_cubed_operations(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(attention, "time_call", lambda fn, **_: {"median_s": 0.5})
    assert attention.gemm_rate(100) == pytest.approx(2 * 100**3 / 0.5)


def test_sizes_beyond_the_reference_budget_are_skipped_with_a_reason() -> None:
    size = 512
    assert attention.reference_gather_bytes(size, 1) > attention.REFERENCE_MAX_GATHER_BYTES
    assert attention.reference_gather_bytes(128, 2) <= attention.REFERENCE_MAX_GATHER_BYTES


@pytest.mark.triton
@pytest.mark.skipif(unavailable_reason("triton") is not None,
                    reason=f"{unavailable_reason('triton')}")
def test_a_case_on_the_triton_backend_allocates_about_its_output(
        monkeypatch: pytest.MonkeyPatch) -> None:
    # Under Triton's interpreter on CPU tensors: the case runs the backend it is given, and the
    # fused forward allocates its output and a few bytes of launch parameters, no window.
    monkeypatch.setattr(attention, "MIN_SECONDS", 0.0)
    row = attention.bench_case(6, 1, bandwidth=1e9, repeats=1, reference=False, sdpa=False,
                               fused="triton")
    assert row["fused_fwd_s"] > 0 and row["fused_fwd_bwd_s"] > 0
    assert row["out_bytes"] <= row["fused_fwd_peak_bytes"] <= row["out_bytes"] + 1024
