from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch

from crossview.bench.camera import bench_camera
from crossview.cli.app import main


def test_rows_cover_every_method_and_pass() -> None:
    rows = bench_camera(views=(1, 2), patches=2, heads=1, head_dim=8, repeats=1)
    assert [(r["views"], r["method"], r["pass"]) for r in rows[:2]] == [
        (1, "sdpa", "forward"), (1, "sdpa", "forward+backward")]
    assert len(rows) == 2 * 3 * 2
    assert all(r["ratio"] == 1.0 for r in rows if r["method"] == "sdpa")
    assert all(r["tokens"] == r["views"] * 4 and r["median_s"] > 0 for r in rows)


def test_cli_writes_json(tmp_path: Path) -> None:
    out = tmp_path / "camera.json"
    with pytest.raises(SystemExit) as exit_info:
        main(["bench", "camera", "--views", "1", "--patches", "2", "--heads", "1",
              "--head-dim", "8", "--repeats", "1", "--json", str(out)])
    assert exit_info.value.code == 0
    payload = json.loads(out.read_text())
    assert payload["benchmark"] == "camera" and len(payload["rows"]) == 6


def test_bad_head_dim_is_a_user_error(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exit_info:
        main(["bench", "camera", "--head-dim", "12"])
    assert exit_info.value.code == 2
    assert "--head-dim" in capsys.readouterr().err


def test_flush_denormal_is_restored() -> None:
    rows = bench_camera(views=(1,), patches=2, heads=1, head_dim=8, repeats=1,
                        flush_denormal=True)
    assert len(rows) == 6
    tiny = torch.tensor([1e-30]) * torch.tensor([1e-10])  # a float32 denormal
    assert float(tiny[0]) != 0.0
