from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import pytest

from crossview.cli.app import main
from crossview.experiments.camera_depth import (
    CONDITIONINGS,
    SETTINGS,
    DepthStudyConfig,
    load_data,
    run_study,
    separated_pairs,
    summarize,
)


def test_test_scenes_hold_every_setting(tmp_path: Path) -> None:
    config = replace(DepthStudyConfig.quick(), train_scenes=1, test_scenes=2,
                     image_size=(16, 16))
    data = load_data(config, tmp_path)
    assert data["train"]["images"].shape == (1, config.views, 3, 16, 16)
    assert set(data["test"]) == {"main", "zoomed", "wide"}
    for scenes in data["test"].values():
        assert scenes["images"].shape == (2, config.more_views, 3, 16, 16)
    # the cache is keyed by what the scenes depend on
    again = load_data(replace(config, wide_separation=(30.0, 40.0)), tmp_path)
    assert not (again["test"]["wide"]["viewmats"] == data["test"]["wide"]["viewmats"]).all()
    assert len(list(tmp_path.glob("depth-scenes-*.pt"))) == 2


def _entry(mean: float, std: float, n: int = 3) -> dict[str, dict[str, float]]:
    return {"x": {"mean": mean, "std": std, "n": n}}


def test_separated_pairs_by_hand() -> None:
    summary = {"conditionings": {"a": _entry(0.10, 0.01), "b": _entry(0.13, 0.01),
                                 "c": _entry(0.115, 0.002), "d": _entry(0.5, 0.0, n=1)}}
    # a-b: gap 0.03 > 2 * 0.01; a-c: 0.015 < 0.02; b-c: 0.015 < 0.02; d has one seed
    assert separated_pairs(summary, "x", lower_is_better=True) == [
        {"better": "a", "worse": "b", "gap": pytest.approx(0.03)}]
    assert separated_pairs(summary, "x", lower_is_better=False) == [
        {"better": "b", "worse": "a", "gap": pytest.approx(0.03)}]


def test_quick_study_runs_resumes_and_summarizes(tmp_path: Path) -> None:
    config = DepthStudyConfig.quick()
    done: list[str] = []
    run_study(config, tmp_path / "out", tmp_path / "cache", jobs=1, on_done=done.append)
    assert sorted(Path(p).name for p in done) == sorted(f"{c}-seed0.json" for c in CONDITIONINGS)
    again: list[str] = []
    run_study(config, tmp_path / "out", tmp_path / "cache", jobs=1, on_done=again.append)
    assert again == []  # every run finished: nothing is trained twice
    summary = summarize(tmp_path / "out", "test")
    assert list(summary["conditionings"]) == list(CONDITIONINGS)
    record = json.loads((tmp_path / "out" / "runs" / "gta-seed0.json").read_text())
    for setting in SETTINGS:
        entry = summary["conditionings"]["gta"][f"{setting}_abs_rel"]
        assert entry["values"] == [record["test"][setting]["abs_rel"]]
        assert 0 <= summary["conditionings"]["gta"][f"{setting}_delta1"]["mean"] <= 100
    table = (tmp_path / "out" / "table.md").read_text()
    assert "| no cameras | 1 |" in table and "Command: `test`" in table
    assert (tmp_path / "out" / "plot.png").read_bytes()[:4] == b"\x89PNG"


def test_cli_quick_mode(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "results"
    with pytest.raises(SystemExit) as exit_info:
        main(["experiment", "camera-depth", "--quick", "--out", str(out), "--cache-dir",
              str(tmp_path / "cache"), "--seeds", "1"])
    assert exit_info.value.code == 0
    results = json.loads((out / "results.json").read_text())
    assert results["command"].startswith("crossview experiment camera-depth --quick --seeds 1")
    assert results["config"]["steps"] == DepthStudyConfig.quick().steps
    assert "4 views (OOD) AbsRel" in capsys.readouterr().out


@pytest.mark.parametrize(("option", "value", "message"), [
    ("--steps", "0", "--steps, --seeds and --jobs must be positive"),
    ("--seeds", "0", "--steps, --seeds and --jobs must be positive"),
    ("--jobs", "0", "--steps, --seeds and --jobs must be positive"),
    ("--conditioning", "rope", "--conditioning 'rope' is not one of plucker, naive"),
])
def test_cli_rejects_bad_options(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                 option: str, value: str, message: str) -> None:
    with pytest.raises(SystemExit) as exit_info:
        main(["experiment", "camera-depth", option, value, "--out", str(tmp_path / "out"),
              "--cache-dir", str(tmp_path / "cache")])
    assert exit_info.value.code == 2
    err = capsys.readouterr().err
    assert message in err and len(err.strip().splitlines()) == 1
    assert not (tmp_path / "cache").exists()


def test_cli_trains_only_the_chosen_conditionings(tmp_path: Path) -> None:
    out = tmp_path / "results"
    with pytest.raises(SystemExit) as exit_info:
        main(["experiment", "camera-depth", "--quick", "--out", str(out), "--cache-dir",
              str(tmp_path / "cache"), "--conditioning", "none", "--conditioning", "gta"])
    assert exit_info.value.code == 0
    assert sorted(p.name for p in (out / "runs").iterdir()) == ["gta-seed0.json",
                                                                "none-seed0.json"]
    results = json.loads((out / "results.json").read_text())
    assert list(results["conditionings"]) == ["gta", "none"]
    assert "--conditioning gta --conditioning none" in results["command"]


def test_a_stopped_run_writes_no_record(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """SIGINT / SIGTERM make the trainer checkpoint and return early: the study stops with one
    error line instead of recording a half-trained model."""
    from crossview.errors import UserError
    from crossview.train.trainer import Trainer

    monkeypatch.setattr(Trainer, "run", lambda self: {"step": self.step})  # stopped at once
    with pytest.raises(UserError, match=r"stopped at step 0 of 3 .*run the same command"):
        run_study(DepthStudyConfig.quick(), tmp_path / "out", tmp_path / "cache", jobs=1)
    assert not (tmp_path / "out" / "runs").exists()


def test_a_run_killed_before_its_first_checkpoint_starts_its_log_over(tmp_path: Path) -> None:
    from crossview.experiments.seeded_runs import run_dir

    config = DepthStudyConfig.quick()
    stale = run_dir(tmp_path / "cache", config, "gta", 0) / "log.jsonl"
    stale.parent.mkdir(parents=True)
    stale.write_text('{"kind": "train", "step": 1, "loss": 99.0}\n')
    run_study(config, tmp_path / "out", tmp_path / "cache", jobs=1, conditionings=("gta",))
    record = json.loads((tmp_path / "out" / "runs" / "gta-seed0.json").read_text())
    steps = [json.loads(line)["step"] for line in stale.read_text().splitlines()
             if json.loads(line)["kind"] == "train"]
    assert steps == list(range(1, config.steps + 1)) and 99.0 not in record["loss_curve"]
