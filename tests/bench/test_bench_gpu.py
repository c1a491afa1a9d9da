"""``crossview bench gpu``: the refusal without a GPU, the runner on substitute commands (a step
that fails or outlives its timeout does not stop the next; the JSON and Markdown say what each
did), and a plan that names test files, commands and options that exist."""

from __future__ import annotations

import importlib.util
import json
import os
import sys
from pathlib import Path

import pytest
import torch
import typer

from cli_runner import run_cli
from crossview.bench import gpu
from crossview.cli import bench as bench_cli
from crossview.cli.app import app
from hang_guard import HANG_GUARD_SECONDS

ROOT = Path(__file__).resolve().parents[2]
NO_GPU = pytest.mark.skipif(torch.cuda.is_available(), reason="a CUDA GPU is visible")
# the limit of the step that sleeps: it is what is tested (that the step is ended), not a
# bound on the test, which sleeps for HANG_GUARD_SECONDS so that only the limit can end it
SHORT_STEP_S = 2.0
PYTEST_LINE = "3 passed, 1 skipped, 7 deselected in 0.52s"


def _python(name: str, code: str, **fields: object) -> gpu.Step:
    return gpu.Step(name, (sys.executable, "-c", code), f"substitute {name}",
                    HANG_GUARD_SECONDS, **fields)


def _gone(pid: int) -> bool:
    status = Path(f"/proc/{pid}/status")
    return not status.exists() or "State:\tZ" in status.read_text()


def _model_report(out: Path) -> str:
    rows = [{"model": "T", "size": [1536, 1536], "precision": "fp16", "backend": "triton",
             "refine": None, "median_s": 0.05, "peak_gpu_mib": 1500.0, "status": "ok"},
            {"model": "S", "size": [1536, 1536], "precision": "fp16", "backend": "triton",
             "refine": None, "status": "timeout after 1800 s"}]
    return f"import json; open({str(out / 'model_paper.json')!r}, 'w').write(" \
           f"{json.dumps(json.dumps({'rows': rows, 'complete': False}))})"


@pytest.fixture
def substitute_run(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[dict, Path, int]:
    """Four substitute steps through the real runner: one passes (pytest's summary line), one
    sleeps past its limit with a grandchild, one fails, one writes a ``bench model`` JSON."""
    monkeypatch.setenv("TRITON_INTERPRET", "1")  # the steps must not inherit it
    out = tmp_path / "out"
    pid_file = tmp_path / "grandchild.pid"
    steps = [
        _python("tests", "import os; print(os.environ.get('TRITON_INTERPRET')); "
                         f"print({PYTEST_LINE!r})", parse="pytest"),
        gpu.Step("sleeper", ("sh", "-c", f"sleep {HANG_GUARD_SECONDS} & echo $! > {pid_file}; "
                             "wait"), "sleeps past its limit", SHORT_STEP_S),
        _python("broken", "import sys; print('something broke'); sys.exit(3)"),
        _python("model-paper", _model_report(out), parse="model", output="model_paper.json"),
    ]
    result = gpu.run_steps(steps, out, root=tmp_path, header={"environment": {"gpu": "none"}})
    return result, out, int(pid_file.read_text())


class TestRunner:
    def test_every_step_runs_and_is_recorded_whatever_the_one_before_did(
            self, substitute_run: tuple) -> None:
        result, out, _ = substitute_run
        saved = json.loads((out / "gpu.json").read_text())
        assert saved == result and saved["complete"]
        steps = {s["name"]: s for s in saved["steps"]}
        assert [s["status"] for s in saved["steps"]] == ["ok", "timeout", "failed", "ok"]
        assert {s["status"] for s in saved["steps"]} <= set(gpu.STATUSES)
        assert steps["tests"]["exit_code"] == 0 and steps["broken"]["exit_code"] == 3
        assert steps["broken"]["note"] == "something broke"
        assert steps["sleeper"]["note"].startswith(f"timed out after {SHORT_STEP_S:g} s")
        assert steps["sleeper"]["timeout_s"] == SHORT_STEP_S
        assert SHORT_STEP_S <= steps["sleeper"]["seconds"] < HANG_GUARD_SECONDS
        assert all(isinstance(s["seconds"], float) for s in saved["steps"])
        assert steps["broken"]["command"].startswith(sys.executable)
        assert steps["tests"]["numbers"] == {"passed": 3, "skipped": 1, "deselected": 7}
        assert steps["model-paper"]["numbers"]["complete"] is False
        assert [r["status"] for r in steps["model-paper"]["numbers"]["rows"]] == [
            "ok", "timeout after 1800 s"]
        assert (out / steps["tests"]["log"]).read_text().splitlines()[0] == "None"

    def test_a_step_out_of_time_is_ended_with_what_it_started(self, substitute_run: tuple
                                                               ) -> None:
        _, _, grandchild = substitute_run
        assert _gone(grandchild)

    def test_the_markdown_has_every_step_and_the_paper_beside_ours(self, substitute_run: tuple
                                                                   ) -> None:
        _, out, _ = substitute_run
        text = (out / "gpu.md").read_text()
        assert "| tests | ok | 0 |" in text and "3 passed, 1 skipped, 7 deselected" in text
        assert "| sleeper | timeout |" in text and "| broken | failed | 3 |" in text
        assert "- broken: something broke" in text
        assert gpu.PAPER_SOURCE in text
        # ours: 50 ms and 1500 MiB = 1.57 GB beside the paper's 38 ms and 1.45 GB
        assert "| MatchStereo-T | 0.34 | 38 | 50 | 1.45 | 1.57 | model-paper |" in text
        assert "| MatchStereo-S | 0.98 | 45 | - | 1.73 | - | not measured |" in text
        assert "| MatchFlow-B | 3.6 | 77 | - | 3.22 | - | not measured |" in text
        assert "| T | 1536x1536 | fp16 | triton | - | 50 | 1.5e+03 | - | ok |" in text

    def test_reports_exist_before_the_first_step_ends(self, tmp_path: Path) -> None:
        out = tmp_path / "out"
        check = (f"import json; r = json.load(open({str(out / 'gpu.json')!r})); "
                 "assert not r['complete'] and r['steps'][0]['status'] == 'not run'")
        result = gpu.run_steps([_python("first", check)], out, root=tmp_path)
        assert result["steps"][0]["status"] == "ok", (out / "logs/first.log").read_text()
        assert "not complete" not in (out / "gpu.md").read_text()


    def test_a_run_stopped_from_outside_ends_the_step_and_says_so(self, tmp_path: Path) -> None:
        out, pid_file = tmp_path / "out", tmp_path / "grandchild.pid"
        # the step starts a grandchild, then interrupts this process as Ctrl-C would
        step = gpu.Step("stopped", ("sh", "-c", f"sleep {HANG_GUARD_SECONDS} & echo $! > "
                                    f"{pid_file}; kill -INT $PPID; wait"), "", HANG_GUARD_SECONDS)
        with pytest.raises(KeyboardInterrupt):
            gpu.run_steps([step, _python("next", "pass")], out, root=tmp_path)
        saved = json.loads((out / "gpu.json").read_text())
        assert not saved["complete"]
        assert [s["status"] for s in saved["steps"]] == ["interrupted", "not run"]
        assert saved["steps"][0]["seconds"] < HANG_GUARD_SECONDS
        assert _gone(int(pid_file.read_text()))
        assert "| stopped | interrupted |" in (out / "gpu.md").read_text()


    def test_a_command_that_cannot_start_is_a_failed_step(self, tmp_path: Path) -> None:
        missing = str(tmp_path / "no-such-program")
        result = gpu.run_steps([gpu.Step("missing", (missing,), "", HANG_GUARD_SECONDS),
                                _python("next", "pass")], tmp_path / "out", root=tmp_path)
        first, second = result["steps"]
        assert (first["status"], first["exit_code"]) == ("failed", None)
        assert first["note"].startswith("could not start: ") and second["status"] == "ok"


class TestParsers:
    @pytest.mark.parametrize(("text", "counts"), [
        ("....\n" + PYTEST_LINE, {"passed": 3, "skipped": 1, "deselected": 7}),
        ("= 1 failed, 2 passed, 1 error in 3.1s =", {"failed": 1, "passed": 2, "errors": 1}),
        ("no tests ran in 0.01s", {}),
    ])
    def test_pytest_summary(self, text: str, counts: dict) -> None:
        assert gpu.parse_pytest(text) == counts

    def test_kernels_and_attention_reports(self) -> None:
        kernels = gpu.parse_kernels({"rows": [
            {"variant": "a", "target": "sm_90", "registers": 80, "spills": 0, "cpu_s": 1.0,
             "status": "ok"},
            {"variant": "b", "target": "sm_90", "registers": 96, "spills": 16, "cpu_s": 2.0,
             "status": "spills"},
            {"variant": "c", "target": "sm_90", "registers": 80, "spills": 0, "cpu_s": 0.1,
             "same_as": "a", "status": "same kernel as a"}]})
        assert kernels["variants"] == 3 and kernels["kernels"] == 2
        assert kernels["failing"] == ["b (sm_90): spills"] and kernels["spilled_bytes"] == 16
        attention = gpu.parse_attention({"rows": [
            {"size": 64, "radius": 1, "fused_fwd_s": 1e-4, "fused_fwd_bwd_s": 3e-4,
             "ref_fwd_s": 2e-3, "out_bytes": 100, "fused_fwd_peak_bytes": 100}]})
        row = attention["rows"][0]
        assert row["tokens"] == "64²" and row["fwd_speedup"] == pytest.approx(20)
        assert row["sdpa_fwd_ms"] is None and row["fwd_peak_over_output"] == 1

    def test_a_missing_output_is_said(self, tmp_path: Path) -> None:
        step = gpu.Step("attention", ("true",), "", 1.0, parse="attention",
                        output="attention_cuda.json")
        assert gpu.parse_numbers(step, tmp_path) == {"error": "attention_cuda.json was not "
                                                              "written"}

    @pytest.mark.parametrize(("values", "expected"), [
        ([], (None, {})), (["300"], (300.0, {})),
        (["300", "model=900"], (300.0, {"model": 900.0}))])
    def test_timeouts(self, values: list[str], expected: tuple) -> None:
        assert gpu.parse_timeouts(values, ["tests", "model"]) == expected

    @pytest.mark.parametrize("value", ["0", "soon", "nope=5", "model=-1"])
    def test_bad_timeouts(self, value: str) -> None:
        with pytest.raises(ValueError, match="--timeout takes SECONDS or STEP=SECONDS"):
            gpu.parse_timeouts([value], ["tests", "model"])


class TestPlan:
    """The plan names what exists: a new GPU test, a renamed option or a changed command in
    docs/attention.md fails here instead of silently leaving the GPU run."""

    def test_the_cuda_test_files_are_exactly_those_with_gpu_cases(self) -> None:
        marker = "pytest.mark." + "gpu"  # spelt so that this file is not one of them
        with_gpu = {str(p.relative_to(ROOT)) for p in (ROOT / "tests").rglob("test_*.py")
                    if marker in p.read_text()}
        assert set(gpu.GPU_TEST_FILES) == with_gpu
        assert '"gpu: needs a CUDA GPU' in (ROOT / "pyproject.toml").read_text()

    def test_every_crossview_step_parses_with_the_real_command_line(self) -> None:
        root = typer.main.get_command(app)
        steps = [s for s in gpu.plan(Path("/tmp/out")) if s.argv[1:3] == ("-m", "crossview")]
        assert {s.name for s in steps} == {"kernels", "attention", "model-paper", "model"}
        for step in steps:
            group, words = root, list(step.argv[3:])
            while isinstance(group, typer.core.TyperGroup):
                context = typer.Context(group)
                group = group.get_command(context, words.pop(0))
                assert group is not None, step.argv
            group.make_context(step.name, words)  # raises on an unknown option or value

    def test_the_bench_steps_are_the_commands_of_docs_attention(self) -> None:
        docs = (ROOT / "docs" / "attention.md").read_text()
        for step in gpu.plan(Path("/tmp/out")):
            if step.docs is not None:
                words = step.docs.split()[1:]  # after "crossview"
                assert step.docs in docs and list(step.argv[3:3 + len(words)]) == words

    def test_the_pytest_step_runs_the_files_with_the_gpu_marker(self) -> None:
        step = gpu.plan(Path("/tmp/out"))[0]
        assert step.argv[1:6] == ("-m", "pytest", "-q", "-m", "gpu")
        assert all((ROOT / f).is_file() for f in gpu.GPU_TEST_FILES)
        assert step.argv[-len(gpu.GPU_TEST_FILES):] == gpu.GPU_TEST_FILES


def _fails_with_one_line(args: list[str], capsys: pytest.CaptureFixture[str]) -> str:
    code, out, err = run_cli(args, capsys)
    assert code == 2 and out == ""
    assert err.startswith("error: ") and len(err.strip().splitlines()) == 1, err
    return err.strip()


class TestCommand:
    @NO_GPU
    def test_without_a_gpu_it_refuses_in_one_line_and_writes_nothing(
            self, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
        err = _fails_with_one_line(["bench", "gpu", "--out", str(tmp_path / "gpu")], capsys)
        assert err == ("error: bench gpu needs a CUDA GPU and torch sees none "
                       "(torch.cuda.is_available() is False); --dry-run lists its steps")
        assert list(tmp_path.iterdir()) == []

    @pytest.mark.parametrize(("args", "message"), [
        (["--step", "nope"], "error: unknown --step nope; expected one of tests, kernels, "
                             "attention, model-paper, model"),
        (["--timeout", "x"], "error: --timeout takes SECONDS or STEP=SECONDS"),
        (["--target", "hopper"], "error: --target takes sm_NN (sm_90, sm_80), got 'hopper'"),
    ])
    def test_option_mistakes_fail_before_anything_runs(
            self, tmp_path: Path, capsys: pytest.CaptureFixture[str], args: list[str],
            message: str) -> None:
        err = _fails_with_one_line(["bench", "gpu", "--out", str(tmp_path / "g"), *args],
                                   capsys)
        assert err.startswith(message)
        assert list(tmp_path.iterdir()) == []

    def test_without_triton_it_says_which_extra_to_install(
            self, tmp_path: Path, capsys: pytest.CaptureFixture[str],
            monkeypatch: pytest.MonkeyPatch) -> None:
        real_find_spec = importlib.util.find_spec
        monkeypatch.setattr(bench_cli.torch.cuda, "is_available", lambda: True)
        monkeypatch.setattr(importlib.util, "find_spec", lambda name, *rest: (
            None if name == "triton" else real_find_spec(name, *rest)))
        err = _fails_with_one_line(["bench", "gpu", "--out", str(tmp_path / "g")], capsys)
        assert err == "error: bench gpu needs Triton: pip install 'crossview[gpu]'"
        assert list(tmp_path.iterdir()) == []

    def test_dry_run_lists_the_steps_and_writes_nothing(
            self, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
        code, out, err = run_cli(["bench", "gpu", "--dry-run", "--out", str(tmp_path / "g"),
                                  "--step", "model-paper", "--step", "tests", "--timeout",
                                  "100", "--timeout", "tests=50"], capsys)
        assert code == 0, err
        lines = out.splitlines()
        assert lines[0].startswith("bench gpu would run 2 steps from ")
        assert lines[1].startswith("  model-paper (timeout 100 s): MatchStereo-T/S/B")
        assert "--size 1536x1536 --precision fp16" in lines[2]
        assert lines[3].startswith("  tests (timeout 50 s)") and "-m gpu" in lines[4]
        assert lines[-1] == "dry run: nothing was run or written"
        assert list(tmp_path.iterdir()) == []

    def test_a_run_prints_progress_lines_tables_and_fails_if_a_step_did(
            self, tmp_path: Path, capsys: pytest.CaptureFixture[str],
            monkeypatch: pytest.MonkeyPatch) -> None:
        """The command on substitute steps, as if a GPU and Triton were there."""
        real_find_spec = importlib.util.find_spec
        monkeypatch.setattr(bench_cli.torch.cuda, "is_available", lambda: True)
        monkeypatch.setattr(importlib.util, "find_spec", lambda name, *rest: (
            object() if name == "triton" else real_find_spec(name, *rest)))
        monkeypatch.setattr(gpu, "environment", lambda root: {"gpu": "substitute"})
        monkeypatch.setattr(gpu, "plan", lambda out, **options: [
            _python("fine", "print('fine')"), _python("bad", "raise SystemExit(1)")])
        code, out, err = run_cli(["bench", "gpu", "--out", str(tmp_path / "g"), "--target",
                                  "sm_90"], capsys)
        assert code == 1
        assert "bench gpu 0/2: fine running (timeout" in err
        assert "bench gpu 1/2: fine ok (exit code 0)" in err
        assert "bench gpu 2/2: bad failed (exit code 1)" in err
        assert err.strip().splitlines()[-1] == ("error: 1 of 2 steps did not pass: bad "
                                                "(failed)")
        assert "the paper's GPU figures and ours" in out
        assert f"wrote {tmp_path / 'g' / 'gpu.json'} and {tmp_path / 'g' / 'gpu.md'}" in out
        saved = json.loads((tmp_path / "g" / "gpu.json").read_text())
        assert saved["command"] == ("crossview bench gpu --out " + str(tmp_path / "g")
                                    + " --target sm_90 --step fine --step bad --timeout "
                                    f"fine={HANG_GUARD_SECONDS} --timeout "
                                    f"bad={HANG_GUARD_SECONDS}")
        assert saved["environment"] == {"gpu": "substitute"}
        assert sorted(os.listdir(tmp_path / "g")) == ["gpu.json", "gpu.md", "logs"]
