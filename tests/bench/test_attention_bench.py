"""Smoke run of ``crossview bench attention`` on a tiny grid: JSON structure and the plot, never
a time."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from crossview.attention.match import cpu_build, unavailable_reason
from crossview.bench import attention
from crossview.cli.app import main

pytestmark = pytest.mark.skipif(cpu_build.unavailable_reason() is not None,
                                reason=f"{cpu_build.unavailable_reason()}")


def test_quick_bench_writes_json_and_plot(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                          capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setattr(attention, "QUICK_SIZES", (4, 6))
    monkeypatch.setattr(attention, "COPY_BYTES", 2**20)
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
    assert "MatchAttention, 4 heads x 64 ch" in capsys.readouterr().out


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
