from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import pytest

from crossview.cli.app import main
from crossview.experiments.camera_encodings import StudyConfig, run_study, summarize
from crossview.experiments.seeded_runs import run_dir
from crossview.models.multiview import CONDITIONINGS


def test_cached_scenes_follow_the_config(tmp_path: Path) -> None:
    from crossview.experiments.camera_encodings import load_data

    config = replace(StudyConfig.quick(), train_scenes=1, test_scenes=1, image_size=(16, 16))
    first = load_data(config, tmp_path)
    assert first["test"]["images"].shape[1] == config.more_context + config.targets
    more = replace(config, more_context=5)  # the test scenes need 7 views now, not 6
    assert load_data(more, tmp_path)["test"]["images"].shape[1] == 7


def test_failed_save_leaves_no_file(tmp_path: Path) -> None:
    from crossview.experiments.seeded_runs import save_atomic

    with pytest.raises(Exception, match=r"(?i)pickle"):
        save_atomic(tmp_path / "runs" / "data.pt", {"f": lambda: 0}, as_json=False)
    with pytest.raises(TypeError):
        save_atomic(tmp_path / "runs" / "run.json", {"x": object()}, as_json=True)
    assert list((tmp_path / "runs").iterdir()) == []


def test_quick_study_writes_runs_and_summary_and_resumes(tmp_path: Path) -> None:
    config = StudyConfig.quick()
    done: list[str] = []
    run_study(config, tmp_path / "out", tmp_path / "cache", jobs=1, on_done=done.append)
    assert len(done) == len(CONDITIONINGS)
    summary = summarize(tmp_path / "out", "test")
    assert set(summary["conditionings"]) == set(CONDITIONINGS)
    for entry in summary["conditionings"].values():
        assert 0.0 < entry["in_distribution_psnr"]["mean"] < 60.0
    assert (tmp_path / "out" / "plot.png").stat().st_size > 0
    assert "PRoPE + CamRay" in (tmp_path / "out" / "table.md").read_text()
    again: list[str] = []
    run_study(config, tmp_path / "out", tmp_path / "cache", jobs=1, on_done=again.append)
    assert again == []
    # each run is a training run with checkpoints: a run whose record was lost (killed before
    # writing it) resumes at its last step and scores the same model again
    lost = tmp_path / "out" / "runs" / "gta-seed0.json"
    before = json.loads(lost.read_text())
    lost.unlink()
    run_study(config, tmp_path / "out", tmp_path / "cache", jobs=1, on_done=again.append)
    after = json.loads(lost.read_text())
    assert again == [str(lost)] and after["test"] == before["test"]
    assert after["loss_curve"] == before["loss_curve"]
    checkpoints = run_dir(tmp_path / "cache", config, "gta", 0)
    # (and the TensorBoard events, where tensorboard is installed)
    assert sorted(p.name for p in checkpoints.iterdir() if p.name != "tensorboard") == [
        "log.jsonl", f"step-{config.steps:08d}.pt"]
    # another budget trains its own runs instead of resuming these
    assert run_dir(tmp_path / "cache", replace(config, steps=4), "gta", 0) != checkpoints
    # more seeds add runs and keep the finished ones (the seed count is not part of a run)
    assert run_dir(tmp_path / "cache", replace(config, seeds=2), "gta", 0) == checkpoints
    more: list[str] = []
    run_study(replace(config, seeds=2), tmp_path / "out", tmp_path / "cache", jobs=1,
              conditionings=("gta",), on_done=more.append)
    assert more == [str(tmp_path / "out" / "runs" / "gta-seed1.json")]
    assert json.loads(lost.read_text()) == after


def test_cli_quick_mode(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "results"
    with pytest.raises(SystemExit) as exit_info:
        main(["experiment", "camera-encodings", "--quick", "--jobs", "1", "--out", str(out),
              "--cache-dir", str(tmp_path / "cache")])
    assert exit_info.value.code == 0
    results = json.loads((out / "results.json").read_text())
    assert results["command"].startswith("crossview experiment camera-encodings --quick")
    assert results["config"]["steps"] == StudyConfig.quick().steps
    assert "PSNR 2 views" in capsys.readouterr().out


def test_cli_rejects_bad_budget(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exit_info:
        main(["experiment", "camera-encodings", "--steps", "0"])
    assert exit_info.value.code == 2
    assert "--steps" in capsys.readouterr().err


@pytest.mark.parametrize("where", ["out under a file", "runs is a file", "read-only out",
                                   "cache under a file", "results.json", "table.md",
                                   "plot.png"])
def test_cli_checks_output_directories_before_running(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str],
        where: str) -> None:
    import crossview.experiments.camera_encodings as study

    started: list[Path] = []
    monkeypatch.setattr(study, "run_study", lambda config, out, *a, **k: started.append(out))
    blocker = tmp_path / "file.txt"
    blocker.write_text("x")
    out, cache = tmp_path / "results", tmp_path / "cache"
    if where == "runs is a file":
        out.mkdir()
        (out / "runs").write_text("x")
    if where.endswith(("json", "md", "png")):  # a directory where a summary file must go
        (out / where).mkdir(parents=True)
    out = {"out under a file": blocker / "results", "read-only out": Path("/proc/crossview-x")
           }.get(where, out)
    cache = blocker / "cache" if where == "cache under a file" else cache
    with pytest.raises(SystemExit) as exit_info:
        main(["experiment", "camera-encodings", "--quick", "--jobs", "1", "--out", str(out),
              "--cache-dir", str(cache)])
    err = capsys.readouterr().err
    assert exit_info.value.code == 2 and started == []
    assert len(err.strip().splitlines()) == 1 and err.startswith("error: "), err
    expected = {"out under a file": "file.txt: exists and is not a directory",
                "runs is a file": "runs: exists and is not a directory",
                "read-only out": "/proc/crossview-x: cannot write to this output directory",
                "cache under a file": "file.txt: exists and is not a directory"}.get(
        where, f"{out / where}: is a directory; cannot write an output file of that name")
    assert expected in err
    assert not (tmp_path / "cache").exists() and blocker.read_text() == "x"
