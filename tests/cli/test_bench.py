"""``crossview bench``: output paths and option mistakes fail before anything is measured."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
import torch
from PIL import Image

from crossview.cli.app import main

# the smallest cases of each benchmark: a wrong --json must fail before they run
QUICK = {
    "camera": ["--views", "1", "--patches", "2", "--heads", "1", "--head-dim", "8",
               "--repeats", "1"],
    "data": ["--case", "stereo", "--count", "1", "--size", "16x16"],
    "train": ["--model", "nope", "--repeats", "1", "--size", "16x16"],
}


def _fails_with_one_line(argv: list[str], capsys: pytest.CaptureFixture[str]) -> str:
    with pytest.raises(SystemExit) as done:
        main(argv)
    captured = capsys.readouterr()
    err = captured.err.strip()
    assert done.value.code == 2
    assert err.startswith("error: ") and len(err.splitlines()) == 1, err
    assert captured.out == ""  # nothing was measured or printed
    return err


@pytest.mark.parametrize("subject", sorted(QUICK))
@pytest.mark.parametrize(("target", "message"), [
    ("{tmp}", "is a directory; give a file name"),
    ("{tmp}/blocker/out.json", "blocker: exists and is not a directory"),
    ("/proc/crossview-bench/out.json", "cannot write to this output directory"),
])
def test_a_bad_json_path_fails_before_measuring(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                                subject: str, target: str, message: str) -> None:
    (tmp_path / "blocker").write_text("a file")
    err = _fails_with_one_line(["bench", subject, *QUICK[subject], "--json",
                                target.format(tmp=tmp_path)], capsys)
    assert message in err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["blocker"]


def test_unknown_train_backend(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    err = _fails_with_one_line(["bench", "train", "--backend", "nosuch", "--json",
                                str(tmp_path / "t.json")], capsys)
    assert "unknown --backend nosuch" in err
    assert not (tmp_path / "t.json").exists()


def test_json_is_written_whole_without_a_temporary_file(tmp_path: Path) -> None:
    target = tmp_path / "deeper" / "camera.json"
    with pytest.raises(SystemExit) as done:
        main(["bench", "camera", *QUICK["camera"], "--json", str(target)])
    assert done.value.code in (0, None)
    assert json.loads(target.read_text())["benchmark"] == "camera"
    assert [p.name for p in target.parent.iterdir()] == ["camera.json"]


def test_threads_option_leaves_the_callers_thread_count(tmp_path: Path) -> None:
    threads = torch.get_num_threads()
    wanted = 1 if threads > 1 else 2
    with pytest.raises(SystemExit) as done:
        main(["bench", "camera", *QUICK["camera"], "--threads", str(wanted), "--json",
              str(tmp_path / "camera.json")])
    assert done.value.code in (0, None)
    assert torch.get_num_threads() == threads  # later tests keep theirs (bitwise resumes)


@pytest.mark.parametrize(("plot", "message"), [
    ("{tmp}/a.json", "{tmp}/a.json: given twice as an output file"),
    ("{tmp}/taken", "--plot {tmp}/taken: is a directory; give a file name"),
])
def test_attention_plot_mistakes_fail_before_measuring(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], plot: str, message: str) -> None:
    (tmp_path / "taken").mkdir()
    err = _fails_with_one_line(["bench", "attention", "--quick", "--json",
                                str(tmp_path / "a.json"), "--plot", plot.format(tmp=tmp_path)],
                               capsys)
    assert err == f"error: {message.format(tmp=tmp_path)}"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["taken"]


@pytest.mark.skipif(torch.cuda.is_available(), reason="a CUDA GPU is visible")
@pytest.mark.parametrize("subject", ["attention", "model"])
def test_device_cuda_without_a_gpu_fails_before_measuring(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], subject: str) -> None:
    err = _fails_with_one_line(["bench", subject, "--device", "cuda", "--json",
                                str(tmp_path / "a.json")], capsys)
    assert err == ("error: --device cuda: torch sees no CUDA GPU (torch.cuda.is_available() is "
                   "False)")
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("subject", ["attention", "model"])
def test_an_unknown_device_fails_before_measuring(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], subject: str) -> None:
    err = _fails_with_one_line(["bench", subject, "--device", "tpu", "--json",
                                str(tmp_path / "a.json")], capsys)
    assert err == "error: --device must be one of cpu, cuda, got 'tpu'"
    assert list(tmp_path.iterdir()) == []


def test_the_model_table_piped_is_not_cut(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                          monkeypatch: pytest.MonkeyPatch) -> None:
    """``bench model | tee`` keeps every column and the whole status of each row (the cases'
    measurements are replaced: only the table is under test)."""
    from crossview.bench import device as device_bench
    from crossview.bench import model as model_bench

    status = "failed (1): RuntimeError: the child process ran out of memory at 1536x1536"
    row = {"model": "T", "size": [384, 1248], "precision": "fp32", "backend": "cpu",
           "refine": None, "median_s": 1.25, "cpu_s": 2.5, "peak_rss_mib": 900.0,
           "peak_gpu_mib": None, "ratio": 3.0, "vs_fp32": 1.0, "status": status}

    def measured(cases: list, on_case: object, on_rows: object) -> list[dict]:
        on_rows([row])
        return [row]

    monkeypatch.setattr(device_bench, "fused_backend", lambda device: "cpu")
    monkeypatch.setattr(model_bench, "bench_model", measured)
    monkeypatch.setenv("COLUMNS", "80")
    with pytest.raises(SystemExit) as done:
        main(["bench", "model", "--model", "T", "--size", "384x1248", "--precision", "fp32",
              "--no-big", "--json", str(tmp_path / "m.json")])
    out = capsys.readouterr().out
    assert done.value.code in (0, None) and "…" not in out
    header = next(line for line in out.splitlines() if "peak RSS MiB" in line)
    assert "fused speed-up" in header and "vs fp32" in header and "status" in header
    assert any(status in line and "384x1248" in line for line in out.splitlines()), out


def test_an_unreadable_pair_fails_before_measuring(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    good = tmp_path / "left.png"
    Image.fromarray(np.zeros((8, 8, 3), np.uint8)).save(good)
    broken = tmp_path / "right.png"
    broken.write_bytes(b"not an image")
    err = _fails_with_one_line(["bench", "model", "--pair", str(good), str(broken), "--json",
                                str(tmp_path / "m.json")], capsys)
    assert err.startswith("error: ") and str(broken) in err
    assert not (tmp_path / "m.json").exists()


def test_bench_match_times_semantic_models_only(tmp_path: Path,
                                               capsys: pytest.CaptureFixture[str]) -> None:
    err = _fails_with_one_line(["bench", "match", "--model-only", "--model", "matchstereo-mini",
                                "--json", str(tmp_path / "m.json")], capsys)
    assert err == ("error: --model 'matchstereo-mini' estimates stereo; bench match times a "
                   "semantic model: transformatcher, transformatcher-lite0-lite2")
    assert not (tmp_path / "m.json").exists()


def test_bench_model_takes_stereo_and_flow_models_only(tmp_path: Path,
                                                       capsys: pytest.CaptureFixture[str]) -> None:
    err = _fails_with_one_line(["bench", "model", "--model", "transformatcher", "--json",
                                str(tmp_path / "m.json")], capsys)
    assert "--model takes T, S, B or a stereo or flow model name (" in err
    assert "matchflow-hybrid" in err and "matchstereo-hybrid" in err
    assert not (tmp_path / "m.json").exists()
