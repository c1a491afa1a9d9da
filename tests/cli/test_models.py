"""``crossview models``: every registered model with its task, size, default weights and their
licence."""

from __future__ import annotations

from pathlib import Path

import pytest

from cli_runner import run_cli
from crossview import api


def test_models_lists_task_parameters_weights_and_licence(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setenv("CROSSVIEW_HOME", str(tmp_path))
    (tmp_path / "weights").mkdir()
    (tmp_path / "weights" / "matchstereo_tiny_fsd.pth").write_bytes(b"placed by hand")
    code, out, err = run_cli(["models"], capsys)
    assert code == 0 and err == "", err
    rows = {cells[0]: cells[1:] for cells in (
        [cell.strip() for cell in line.split("│")[1:-1]]
        for line in out.splitlines() if line.startswith("│"))}
    assert sorted(rows) == api.list_models()
    assert rows["matchstereo-hybrid"] == ["stereo", "1.51 M", "bundled", "Apache-2.0"]
    assert rows["matchstereo-t"] == ["stereo", "8.78 M", "published, in the cache", "unknown"]
    assert rows["matchflow-b"] == ["flow", "75.45 M", "published, not downloaded", "unknown"]
    assert rows["transformatcher"][0::2] == ["semantic", "bundled"]
    assert rows["multiview"][0::2] == ["novel-view", "none"] and rows["multiview"][3] == "-"
