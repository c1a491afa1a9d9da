from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch

from crossview.bench.data import CASES, bench_data, make_dataset
from crossview.cli.app import main


def test_every_case_gives_a_row_and_restores_threads() -> None:
    threads = torch.get_num_threads()
    cases = [(case, (24, 32)) for case in CASES]
    seen: list[str] = []
    rows = bench_data(cases, 2, warmup=0, views=2, on_sample=seen.append)
    assert [r["case"] for r in rows] == list(CASES)
    assert seen == [case for case in CASES for _ in range(2)]
    assert all(r["samples"] == 2 and r["per_s_wall"] > 0 and r["per_s_cpu"] > 0 for r in rows)
    assert torch.get_num_threads() == threads


def test_augmented_cases_crop() -> None:
    sample = make_dataset("stereo+augment", (32, 48), 1)[0]
    assert sample["image0"].shape == (3, 24, 36)
    with pytest.raises(ValueError, match="case"):
        make_dataset("chairs", (32, 48), 1)


def test_cli_writes_json(tmp_path: Path) -> None:
    out = tmp_path / "data.json"
    with pytest.raises(SystemExit) as exit_info:
        main(["bench", "data", "--size", "24x32", "--count", "1", "--case", "stereo",
              "--case", "flow", "--json", str(out)])
    assert exit_info.value.code == 0
    payload = json.loads(out.read_text())
    assert payload["benchmark"] == "data" and [r["case"] for r in payload["rows"]] == [
        "stereo", "flow"]


@pytest.mark.parametrize(("args", "message"), [
    (["--case", "chairs"], "--case"),
    (["--size", "32by32"], "HxW"),
    (["--size", "8x8"], "16x16"),
])
def test_bad_options_are_user_errors(args: list[str], message: str,
                                     capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exit_info:
        main(["bench", "data", *args])
    assert exit_info.value.code == 2
    assert message in capsys.readouterr().err
