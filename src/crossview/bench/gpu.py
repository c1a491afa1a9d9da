"""``crossview bench gpu``: every GPU check of the project in one run, for the few minutes a GPU
is at hand.

The steps (:func:`plan`) are the suite's CUDA tests (``pytest -m gpu`` over
:data:`GPU_TEST_FILES`), the compile check of the Triton kernels (``crossview bench kernels``
for the GPU's own architecture) and the GPU benchmarks whose commands docs/attention.md gives
("On a GPU"): ``bench attention --device cuda``, ``bench model --device cuda`` at the size and
precision of the paper's figures (:data:`PAPER_GPU`), and the full ``bench model --device
cuda``. Each runs as a child process in its own process group, from the repository root, with
its output in ``logs/NAME.log`` and its own timeout; a step that fails or times out (its whole
process group is ended) is recorded as such and the next one runs. After every step
:func:`write_reports` publishes ``gpu.json`` (each step: command, status, exit code, seconds,
the numbers parsed from its output) and ``gpu.md`` (the same as tables, the paper's figures
beside ours), so a run stopped from outside still leaves the steps done so far.
"""

from __future__ import annotations

import contextlib
import datetime
import importlib.util
import json
import os
import re
import shlex
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from importlib import metadata
from pathlib import Path
from typing import Any

import crossview
from crossview.lazy import lazy_import
from crossview.output import staged_files

torch = lazy_import("torch")  # the environment's versions and GPU, read when a run starts

# Test files holding CUDA cases (`pytest.mark.gpu`); tests/bench/test_bench_gpu.py checks this
# list against the suite, so a new GPU test cannot be left out.
GPU_TEST_FILES = (
    "tests/attention/match/test_backends.py",
    "tests/attention/match/test_gpu_kernels.py",
    "tests/bench/test_bench_device.py",
    "tests/bench/test_model.py",
)

# The authors' GPU figures of the published checkpoints (the MatchAttention project page and
# README, as recorded in the team's notes on the published weights): inference at 1536x1536,
# fp16.
PAPER_SOURCE = ("the MatchAttention authors' project page and README (published checkpoints, "
                "Hugging Face Tingman/MatchAttention): inference at 1536x1536, fp16")
PAPER_SIZE, PAPER_PRECISION = (1536, 1536), "fp16"
PAPER_GPU = (  # (model, bench model's name for it, TFLOPs, GB, ms)
    ("MatchStereo-T", "T", 0.34, 1.45, 38),
    ("MatchStereo-S", "S", 0.98, 1.73, 45),
    ("MatchStereo-B", "B", 3.59, 2.94, 75),
    ("MatchFlow-B", "matchflow-b", 3.60, 3.22, 77),
)

STATUSES = ("ok", "failed", "timeout", "interrupted", "not run")
KILL_GRACE_S = 10.0  # between SIGTERM and SIGKILL of a step that ran out of time


@dataclass(frozen=True)
class Step:
    """One command of the run. ``argv`` runs from the repository root; ``output`` is the file it
    writes into the output folder (read by the parser named ``parse``); ``docs``: the command
    as docs/attention.md gives it, where it does."""

    name: str
    argv: tuple[str, ...]
    what: str
    timeout_s: float
    parse: str | None = None
    output: str | None = None
    docs: str | None = None
    env: dict[str, str] = field(default_factory=dict)


def plan(out: Path, *, target: str = "sm_90", python: str = sys.executable) -> list[Step]:
    """The steps of a run writing into ``out`` (absolute), compiling for ``target``."""
    cli = (python, "-m", "crossview", "bench")
    paper = [arg for _, name, *_ in PAPER_GPU for arg in ("--model", name)]
    size = "x".join(map(str, PAPER_SIZE))
    return [
        Step("tests", (python, "-m", "pytest", "-q", "-m", "gpu", "-p", "no:cacheprovider",
                       *GPU_TEST_FILES),
             "the suite's CUDA tests (pytest -m gpu)", 600, parse="pytest"),
        Step("kernels", (*cli, "kernels", "--target", target, "--json",
                         str(out / "kernels.json")),
             f"compile check of the Triton kernels for {target}", 600, parse="kernels",
             output="kernels.json"),
        Step("attention", (*cli, "attention", "--device", "cuda", "--json",
                           str(out / "attention_cuda.json"), "--plot",
                           str(out / "attention_cuda.png")),
             "MatchAttention: triton vs reference vs SDPA, 64² to 512² tokens", 900,
             parse="attention", output="attention_cuda.json",
             docs="crossview bench attention --device cuda"),
        Step("model-paper", (*cli, "model", "--device", "cuda", *paper, "--size", size,
                             "--precision", PAPER_PRECISION, "--no-big", "--json",
                             str(out / "model_paper.json")),
             f"MatchStereo-T/S/B and MatchFlow-B at {size}, {PAPER_PRECISION}: the paper's "
             "figures", 900,
             parse="model", output="model_paper.json",
             docs="crossview bench model --device cuda"),
        Step("model", (*cli, "model", "--device", "cuda", "--json",
                       str(out / "model_cuda.json")),
             "MatchStereo-T/S/B, 384x1248 to 2176x3840, fp16 and bf16", 1800, parse="model",
             output="model_cuda.json", docs="crossview bench model --device cuda"),
    ]


def parse_timeouts(values: Sequence[str], names: Sequence[str]) -> tuple[float | None,
                                                                        dict[str, float]]:
    """``--timeout`` values: ``SECONDS`` (every step) or ``STEP=SECONDS``; returns the default
    (None: each step's own) and the per-step ones. ``ValueError`` naming a bad value."""
    every: float | None = None
    per_step: dict[str, float] = {}
    for value in values:
        name, _, seconds = value.rpartition("=")
        try:
            number = float(seconds)
        except ValueError:
            number = -1.0
        if number <= 0 or (name and name not in names):
            raise ValueError(f"--timeout takes SECONDS or STEP=SECONDS (STEP one of "
                             f"{', '.join(names)}), seconds > 0; got {value!r}")
        if name:
            per_step[name] = number
        else:
            every = number
    return every, per_step


def environment(root: Path) -> dict[str, Any]:
    """What the run measured on: GPU, torch, Triton, crossview and its commit."""
    info: dict[str, Any] = {"torch": torch.__version__, "cuda": torch.version.cuda,
                            "crossview": getattr(crossview, "__version__", None)}
    if torch.cuda.is_available():
        major, minor = torch.cuda.get_device_capability()
        info.update(gpu=torch.cuda.get_device_name(), capability=f"sm_{major}{minor}",
                    gpu_memory_gib=torch.cuda.get_device_properties(0).total_memory / 2**30)
    info["triton"] = None
    if importlib.util.find_spec("triton") is not None:
        with contextlib.suppress(metadata.PackageNotFoundError):
            info["triton"] = metadata.version("triton")
    with contextlib.suppress(OSError, subprocess.SubprocessError):
        done = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=root,
                              capture_output=True, text=True, timeout=10)
        if done.returncode == 0:
            info["commit"] = done.stdout.strip()
    return info


def repository_root() -> Path:
    """The checkout this crossview was imported from (where ``tests/`` lives), else the
    current directory."""
    checkout = Path(crossview.__file__).resolve().parents[2]
    return checkout if (checkout / "tests").is_dir() else Path.cwd()


def _child_env(step: Step) -> dict[str, str]:
    env = {key: value for key, value in os.environ.items() if key != "TRITON_INTERPRET"}
    # the children import this crossview, wherever it was found, and print as they go
    package_root = str(Path(crossview.__file__).resolve().parents[1])
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [package_root, env.get("PYTHONPATH")]))
    env["PYTHONUNBUFFERED"] = "1"
    return {**env, **step.env}


@contextlib.contextmanager
def _signals_wait() -> Iterator[None]:
    """SIGINT and SIGTERM wait until the block ends, then reach their handlers: one arriving
    while ``Popen`` starts a step would leave the step running, unknown to the runner."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    pending: list[int] = []
    previous = {sig: signal.signal(sig, lambda signum, frame: pending.append(signum))
                for sig in (signal.SIGINT, signal.SIGTERM)}
    try:
        yield
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
        for sig in dict.fromkeys(pending):
            signal.raise_signal(sig)


def _end_group(process: subprocess.Popen) -> None:
    """End the step's process group (the step and every process it started): SIGTERM, then
    SIGKILL after :data:`KILL_GRACE_S`."""
    for sig, wait in ((signal.SIGTERM, KILL_GRACE_S), (signal.SIGKILL, None)):
        with contextlib.suppress(ProcessLookupError):
            os.killpg(process.pid, sig)
        try:
            process.wait(timeout=wait)
            return
        except subprocess.TimeoutExpired:
            continue


def run_step(step: Step, *, root: Path, log: Path, timeout_s: float) -> dict[str, Any]:
    """Run ``step`` from ``root`` with stdout and stderr in ``log``; its record (without the
    parsed numbers)."""
    record: dict[str, Any] = {"name": step.name, "what": step.what,
                              "command": shlex.join(step.argv), "timeout_s": timeout_s,
                              "log": str(log), "output": step.output}
    started = time.perf_counter()
    process: subprocess.Popen | None = None
    with open(log, "w") as handle:
        try:
            with _signals_wait():
                process = subprocess.Popen(step.argv, cwd=root, env=_child_env(step),
                                           stdout=handle, stderr=subprocess.STDOUT,
                                           stdin=subprocess.DEVNULL, start_new_session=True)
            code = process.wait(timeout=timeout_s)
            status = "ok" if code == 0 else "failed"
        except OSError as error:  # could not start it
            handle.write(f"could not start: {error}\n")
            return {**record, "status": "failed", "exit_code": None, "seconds": 0.0,
                    "note": f"could not start: {error.strerror or error}"}
        except subprocess.TimeoutExpired:
            _end_group(process)
            code, status = process.returncode, "timeout"
        except BaseException:  # Ctrl-C, SIGTERM: the step goes down with the run
            if process is not None:
                _end_group(process)
            raise
    record.update(status=status, exit_code=code, seconds=time.perf_counter() - started)
    if status == "timeout":
        record["note"] = f"timed out after {timeout_s:g} s; its process group was ended"
    elif status == "failed":
        record["note"] = _last_line(log)
    return record


def _last_line(log: Path) -> str:
    lines = [line.strip() for line in log.read_text(errors="replace").splitlines()
             if line.strip()]
    return lines[-1][:200] if lines else "no output"


def run_steps(steps: Sequence[Step], out: Path, *, root: Path,
              timeouts: dict[str, float] | None = None, header: dict[str, Any] | None = None,
              on_start: Callable[[Step, float], None] | None = None,
              on_done: Callable[[dict[str, Any]], None] | None = None) -> dict[str, Any]:
    """Run ``steps`` in order, each to its end, failure or timeout (``timeouts``: seconds by
    step name, else the step's own), and publish the reports after each; return the result
    written to ``out / "gpu.json"``. ``header`` joins the result (the environment, the
    command line)."""
    timeouts = timeouts or {}
    (out / "logs").mkdir(parents=True, exist_ok=True)
    result: dict[str, Any] = {"benchmark": "gpu", **(header or {}),
                              "started": _now(), "complete": False, "root": str(root),
                              "out": str(out),
                              "steps": [_pending(step, timeouts) for step in steps]}
    write_reports(result, out)
    for index, step in enumerate(steps):
        timeout_s = timeouts.get(step.name, step.timeout_s)
        if on_start is not None:
            on_start(step, timeout_s)
        started = time.perf_counter()
        try:
            record = run_step(step, root=root, log=out / "logs" / f"{step.name}.log",
                              timeout_s=timeout_s)
        except BaseException:  # Ctrl-C, SIGTERM: the reports say where the run stopped
            result["steps"][index].update(
                status="interrupted", seconds=time.perf_counter() - started,
                log=f"logs/{step.name}.log",
                note="the run was stopped while this step ran; its process group was ended")
            write_reports(result, out)
            raise
        record["log"] = f"logs/{step.name}.log"
        record["numbers"] = parse_numbers(step, out)
        result["steps"][index] = record
        write_reports(result, out)
        if on_done is not None:
            on_done(record)
    result.update(complete=True, finished=_now())
    write_reports(result, out)
    return result


def _pending(step: Step, timeouts: dict[str, float]) -> dict[str, Any]:
    return {"name": step.name, "what": step.what, "command": shlex.join(step.argv),
            "timeout_s": timeouts.get(step.name, step.timeout_s), "status": "not run",
            "exit_code": None, "seconds": None, "log": None, "output": step.output,
            "numbers": {}}


def _now() -> str:
    return datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M:%S UTC")


# --- the numbers of each kind of step --------------------------------------------------------

PYTEST_COUNT = re.compile(r"(\d+) (passed|failed|skipped|errors?|xfailed|xpassed|deselected)")


def parse_pytest(text: str) -> dict[str, int]:
    """The counts of pytest's last summary line (``3 passed, 2 skipped in 4.1s``)."""
    for line in reversed(text.splitlines()):
        counts = PYTEST_COUNT.findall(line)
        if counts:
            return {("errors" if kind.startswith("error") else kind): int(n)
                    for n, kind in counts}
    return {}


def parse_kernels(report: dict[str, Any]) -> dict[str, Any]:
    """Variants, distinct kernels, failing variants, registers, spills and compile times of a
    ``bench kernels`` JSON."""
    rows = report.get("rows", [])
    failing = [f"{r['variant']} ({r['target']}): {r['status']}" for r in rows
               if r.get("status") != "ok" and not str(r.get("status", "")).startswith("same")]
    return {"variants": len(rows), "kernels": sum("same_as" not in r for r in rows),
            "failing": failing,
            "max_registers": max((r.get("registers") or 0 for r in rows), default=None),
            "spilled_bytes": sum(r.get("spills") or 0 for r in rows),
            "max_cpu_s": max((r.get("cpu_s") or 0.0 for r in rows), default=None),
            "first_use": report.get("matchstereo_t_float32", {})}


def parse_attention(report: dict[str, Any]) -> dict[str, Any]:
    """Per case of a ``bench attention`` JSON: milliseconds, speed-ups and the fused forward's
    peak over its output."""
    def ms(row: dict[str, Any], key: str) -> float | None:
        return row[key] * 1e3 if key in row else None

    def ratio(row: dict[str, Any], top: str, bottom: str) -> float | None:
        return row[top] / row[bottom] if top in row and bottom in row else None

    rows = [{"tokens": f"{r['size']}²", "radius": r["radius"],
             "fused_fwd_ms": ms(r, "fused_fwd_s"), "fused_fwd_bwd_ms": ms(r, "fused_fwd_bwd_s"),
             "ref_fwd_ms": ms(r, "ref_fwd_s"), "ref_fwd_bwd_ms": ms(r, "ref_fwd_bwd_s"),
             "sdpa_fwd_ms": ms(r, "sdpa_fwd_s"),
             "fwd_speedup": ratio(r, "ref_fwd_s", "fused_fwd_s"),
             "fwd_bwd_speedup": ratio(r, "ref_fwd_bwd_s", "fused_fwd_bwd_s"),
             "fwd_peak_over_output": ratio(r, "fused_fwd_peak_bytes", "out_bytes"),
             "fwd_bwd_over_fwd": ratio(r, "fused_fwd_bwd_s", "fused_fwd_s")}
            for r in report.get("rows", [])]
    return {"rows": rows, "skipped": report.get("skipped", [])}


def parse_model(report: dict[str, Any]) -> dict[str, Any]:
    """Per case of a ``bench model`` JSON (written after every case, so a run cut short still
    has the cases done): latency, peak GPU memory, status."""
    rows = [{"model": r["model"], "size": "x".join(map(str, r["size"])),
             "precision": r["precision"], "backend": r["backend"], "refine": r.get("refine"),
             "median_ms": r["median_s"] * 1e3 if "median_s" in r else None,
             "peak_gpu_mib": r.get("peak_gpu_mib"), "ratio": r.get("ratio"),
             "status": r["status"]} for r in report.get("rows", [])]
    return {"rows": rows, "complete": bool(report.get("complete"))}


PARSERS: dict[str, Callable[[dict[str, Any]], dict[str, Any]]] = {
    "kernels": parse_kernels, "attention": parse_attention, "model": parse_model}


def parse_numbers(step: Step, out: Path) -> dict[str, Any]:
    """The numbers of a finished step: pytest's counts from its log, else what its JSON
    output holds (``{"error": ...}`` if it is missing or unreadable)."""
    if step.parse == "pytest":
        return parse_pytest((out / "logs" / f"{step.name}.log").read_text(errors="replace"))
    if step.parse is None or step.output is None:
        return {}
    path = out / step.output
    try:
        return PARSERS[step.parse](json.loads(path.read_text()))
    except FileNotFoundError:
        return {"error": f"{step.output} was not written"}
    except (ValueError, KeyError, TypeError) as error:
        return {"error": f"{step.output} could not be read: {error!r}"[:200]}


# --- the reports -----------------------------------------------------------------------------

def write_reports(result: dict[str, Any], out: Path) -> None:
    """Publish ``gpu.json`` and ``gpu.md`` in ``out``, together."""
    with staged_files([out / "gpu.json", out / "gpu.md"]) as (json_path, md_path):
        json_path.write_text(json.dumps(result, indent=2) + "\n")
        md_path.write_text(markdown(result))


def _fmt(value: Any, digits: str = ".3g") -> str:
    if value is None:
        return "-"
    return format(value, digits) if isinstance(value, float) else str(value)


def _table(columns: Sequence[str], rows: Sequence[Sequence[Any]]) -> list[str]:
    lines = ["| " + " | ".join(columns) + " |", "|" + "---|" * len(columns)]
    lines += ["| " + " | ".join(_fmt(c).replace("|", "\\|") for c in row) + " |"
              for row in rows]
    return lines


def step_summary(record: dict[str, Any]) -> str:
    """The step's numbers in a few words, for the steps table."""
    numbers = record.get("numbers") or {}
    if "error" in numbers:
        return numbers["error"]
    name = record["name"]
    if name == "tests" or set(numbers) & {"passed", "failed"}:
        return ", ".join(f"{n} {k}" for k, n in numbers.items()) or "-"
    if "variants" in numbers:
        return (f"{numbers['variants']} variants, {numbers['kernels']} kernels, "
                f"{len(numbers['failing'])} failing, {numbers['spilled_bytes']} bytes spilled, "
                f"max {numbers['max_registers']} registers")
    if "rows" in numbers:
        rows = numbers["rows"]
        ok = sum(r.get("status", "ok") == "ok" for r in rows)
        return f"{len(rows)} cases, {ok} ok" + (
            "" if numbers.get("complete", True) else " (cut short)")
    return "-"


def paper_rows(result: dict[str, Any]) -> list[list[Any]]:
    """:data:`PAPER_GPU` beside our fused (triton) median and peak GPU memory at the paper's
    size and precision, from the ``model-paper`` step, else the ``model`` step."""
    ours: dict[str, tuple[dict[str, Any], str]] = {}
    size = "x".join(map(str, PAPER_SIZE))
    for name in ("model", "model-paper"):  # the paper step wins where both measured
        record = next((s for s in result["steps"] if s["name"] == name), None)
        for row in ((record or {}).get("numbers") or {}).get("rows", []):
            if (row["size"], row["precision"], row["backend"]) == (
                    size, PAPER_PRECISION, "triton") and row["status"] == "ok" and \
                    row.get("refine") in (None, False):
                ours[row["model"]] = (row, name)
    rows = []
    for model, name, tflops, gb, ms in PAPER_GPU:
        row, step = ours.get(name, (None, None))
        mib = None if row is None else row.get("peak_gpu_mib")
        rows.append([model, tflops, ms, None if row is None else row["median_ms"], gb,
                     None if mib is None else mib * 2**20 / 1e9,
                     step or "not measured"])
    return rows


def markdown(result: dict[str, Any]) -> str:
    """``gpu.md``: the run, its steps, the paper's GPU figures beside ours, and the tables of
    the steps that measured."""
    env = result.get("environment", {})
    gpu = env.get("gpu") or "no GPU"
    lines = ["# crossview bench gpu", "",
             f"{gpu} ({env.get('capability', '-')}), torch {env.get('torch', '-')} (CUDA "
             f"{env.get('cuda') or '-'}), Triton {env.get('triton') or 'not installed'}, "
             f"crossview {env.get('crossview') or '-'} at commit {env.get('commit') or '-'}; "
             f"started {result.get('started', '-')}"
             + ("" if result.get("complete") else "; **not complete** (steps still to run)"),
             ""]
    if result.get("command"):
        lines += [f"Command: `{result['command']}`", ""]
    lines += ["## Steps", ""]
    lines += _table(["step", "status", "exit code", "seconds", "timeout s", "numbers",
                     "command"],
                    [[s["name"], s["status"], s["exit_code"], s["seconds"], s["timeout_s"],
                      step_summary(s) if s["status"] != "not run" else "-",
                      f"`{s['command']}`"] for s in result["steps"]])
    notes = [f"- {s['name']}: {s['note']}" for s in result["steps"] if s.get("note")]
    lines += ["", *notes, *([""] if notes else [])]
    lines += ["## The paper's GPU figures and ours", "",
              f"Paper: {PAPER_SOURCE}. Ours: `crossview bench model "
              "--device cuda`, `estimate_disparity` with the model's defaults (both views, "
              "padding included) on the triton backend, median of the timed runs; GB = 10^9 "
              "bytes of the process's peak `torch.cuda.max_memory_allocated`.", ""]
    lines += _table(["model", "paper TFLOPs", "paper ms", "ours ms", "paper GB", "ours GB",
                     "ours from"], paper_rows(result))
    for record in result["steps"]:
        numbers = record.get("numbers") or {}
        if record["name"] == "attention" and numbers.get("rows"):
            lines += ["", "## MatchAttention on the GPU (bench attention)", "",
                      "4 heads x 64 channels, float32, median ms; x = reference / fused", ""]
            lines += _table(["tokens", "r", "fused fwd", "fused f+b", "ref fwd", "ref f+b",
                             "SDPA fwd", "fwd x", "f+b x", "fwd peak / output",
                             "f+b / fwd"],
                            [[r["tokens"], r["radius"], r["fused_fwd_ms"],
                              r["fused_fwd_bwd_ms"], r["ref_fwd_ms"], r["ref_fwd_bwd_ms"],
                              r["sdpa_fwd_ms"], r["fwd_speedup"], r["fwd_bwd_speedup"],
                              r["fwd_peak_over_output"], r["fwd_bwd_over_fwd"]]
                             for r in numbers["rows"]])
        elif record["name"].startswith("model") and numbers.get("rows"):
            lines += ["", f"## MatchStereo on the GPU ({record['name']})", ""]
            lines += _table(["model", "size", "precision", "operator", "refine", "median ms",
                             "peak GPU MiB", "fused speed-up", "status"],
                            [[r["model"], r["size"], r["precision"], r["backend"],
                              r["refine"], r["median_ms"], r["peak_gpu_mib"], r["ratio"],
                              r["status"]] for r in numbers["rows"]])
        elif record["name"] == "kernels" and numbers.get("variants"):
            lines += ["", "## Triton kernels (bench kernels)", "", step_summary(record)
                      + f"; slowest compile {_fmt(numbers['max_cpu_s'])} CPU s", ""]
            lines += [f"- failing: {f}" for f in numbers["failing"]]
    return "\n".join(lines).rstrip() + "\n"
