"""``--shift`` of ``python -m crossview.train.semantic train``."""

from __future__ import annotations

import json

import pytest
from safetensors import safe_open

from crossview.train.semantic import main


def _train(run_dir, *extra: str) -> None:
    with pytest.raises(SystemExit) as done:
        main(["train", "--run-dir", str(run_dir), "--grid", "3", "--batch", "1", "--keypoints",
              "8", "--max-steps", "1", *extra])
    assert done.value.code in (0, None)


def _first_loss(run_dir) -> float:
    return json.loads((run_dir / "log.jsonl").read_text().splitlines()[0])["loss"]


def test_shift_changes_the_training_data_and_is_recorded(tmp_path) -> None:
    _train(tmp_path / "plain")
    _train(tmp_path / "again")
    path = tmp_path / "w.safetensors"
    _train(tmp_path / "shifted", "--shift", "0.3", "--export", str(path))
    assert _first_loss(tmp_path / "plain") == _first_loss(tmp_path / "again")
    assert _first_loss(tmp_path / "shifted") != _first_loss(tmp_path / "plain")
    with safe_open(str(path), "pt") as f:
        assert f.metadata()["shift"] == "0.3"


def test_a_bad_shift_is_one_error_line(tmp_path, capsys) -> None:
    with pytest.raises(SystemExit) as done:
        main(["train", "--run-dir", str(tmp_path / "r"), "--shift", "1.5"])
    assert done.value.code == 2
    err = capsys.readouterr().err.strip()
    assert "--shift" in err and len(err.splitlines()) == 1
    assert not (tmp_path / "r").exists()
