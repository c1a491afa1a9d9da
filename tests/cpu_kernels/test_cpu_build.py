"""How crossview.cpu_kernels.cpu_build builds the fused kernels: one build directory per key
(source, flags, compiler, torch, CPU) side by side in the torch extensions cache, one compile
shared by concurrent first runs, and the reference backend with one warning where nothing can be
built.

Only the default build compiles for real (once, shared with test_cpu.py); the other tests
replace torch's ``load`` or the compiler, so they take seconds."""

from __future__ import annotations

import fnmatch
import functools
import os
import platform
import shutil
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from types import ModuleType

import numpy as np
import pytest
import tomllib
import torch
import torch.utils.cpp_extension as cpp_extension
from PIL import Image

from cli_runner import run_cli
from crossview.attention import match_attention
from crossview.attention.match import choose
from crossview.attention.match.choose import BackendChoice, choose_backend
from crossview.cpu_kernels import build_key, cpu_build
from crossview.cpu_kernels.cpu_build import BUILD_PROBLEM
from hang_guard import HANG_GUARD_SECONDS

can_build = pytest.mark.skipif(
    shutil.which(os.environ.get("CXX", "c++")) is None or shutil.which("ninja") is None,
    reason="no C++ compiler or ninja")
Simulate = Callable[[pytest.MonkeyPatch, Path], None]


def _script(path: Path, body: str) -> str:
    path.write_text(body)
    path.chmod(0o755)
    return str(path)


@pytest.mark.skipif(cpu_build.unavailable_reason() is not None,
                    reason=f"{cpu_build.unavailable_reason()}")
def test_the_default_build_lives_in_the_directory_its_key_names() -> None:
    name = cpu_build.build_name()
    assert name == cpu_build.build_name()  # stable: every test and process reuses the one build
    build_dir = Path(cpp_extension._get_build_directory(name, verbose=False))
    assert cpu_build.extension().__file__ == str(build_dir / f"{name}.so")
    for name in cpu_build.FILES:  # every file, headers included, compiled from its copy
        assert (build_dir / name).read_bytes() == (cpu_build.CSRC / name).read_bytes()


def _edit_source(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    edited = tmp_path / "csrc"  # another checkout, one header one comment apart
    shutil.copytree(cpu_build.CSRC, edited)
    header = edited / "weighted_median.h"
    header.write_bytes(header.read_bytes() + b"\n// edited\n")
    monkeypatch.setattr(cpu_build, "CSRC", edited)


def _other_flags(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setattr(cpu_build, "CFLAGS", [*cpu_build.CFLAGS, "-mno-avx512f"])


def _other_march(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv(cpu_build.MARCH_ENV, "x86-64-v3")  # what an AVX2-only CPU gets


def _other_compiler(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("CXX", _script(tmp_path / "g++", "#!/bin/sh\necho 'g++ (GCC) 99.1.0'\n"))


def _other_cpu(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    cpuinfo = tmp_path / "cpuinfo"  # an older CPU than any this suite runs on
    cpuinfo.write_text("model name\t: Intel(R) Pentium(R) 4\nflags\t\t: fpu sse sse2\n")
    monkeypatch.setattr(build_key, "CPUINFO", cpuinfo)


def _other_torch(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setattr(torch, "__version__", "9.9.9")


@can_build
@pytest.mark.parametrize("change", [_edit_source, _other_flags, _other_march, _other_compiler,
                                    _other_cpu, _other_torch], ids=lambda change: change.__name__)
def test_a_changed_input_builds_beside_the_other_build(
        change: Simulate, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    extensions = tmp_path / "extensions"
    monkeypatch.setenv("TORCH_EXTENSIONS_DIR", str(extensions))

    def fake_load(*, name: str, sources: list[str], build_directory: str,
                  **kwargs: object) -> ModuleType:
        assert [Path(source).name for source in sources] == list(cpu_build.SOURCES)
        assert {Path(source).parent for source in sources} == {Path(build_directory)}
        (Path(build_directory) / f"{name}.so").write_text(name)
        return ModuleType(name)

    monkeypatch.setattr(cpp_extension, "load", fake_load)
    first = cpu_build._build.__wrapped__().__name__  # the uncached build, with the fake load
    assert first == cpu_build.build_name()
    change(monkeypatch, tmp_path)
    second = cpu_build._build.__wrapped__().__name__
    assert second != first
    assert sorted(path.name for path in extensions.iterdir()) == sorted([first, second])
    for name in (first, second):
        assert (extensions / name / f"{name}.so").read_text() == name  # neither replaced
    for name in cpu_build.FILES:  # the second build's copies are its own inputs
        assert (extensions / second / name).read_bytes() == (cpu_build.CSRC / name).read_bytes()
    monkeypatch.undo()
    assert cpu_build.build_name() == first  # back to the first build's inputs, back to its key


# Stands in for g++ under torch's real build (ninja, lock, import): logs each compile and link,
# holds the compile until both test processes have started, and links a tiny real Python module
# so that the import after the build succeeds.
FAKE_CXX = r"""
import os, subprocess, sys, sysconfig, time
from pathlib import Path

args = sys.argv[1:]
if "--version" in args or "-dumpversion" in args:  # the build key; torch's compiler check
    print("12.2.0")
    sys.exit()
out = Path(args[args.index("-o") + 1])
compiling = "-c" in args
with open(os.environ["FAKE_CXX_LOG"], "a") as log:
    log.write("compile\n" if compiling else "link\n")
if compiling:
    started = Path(os.environ["FAKE_CXX_STARTED"])
    for _ in range(2400):
        if len(list(started.iterdir())) == 2:
            break
        time.sleep(0.05)
    time.sleep(1)  # let the second process reach the lock this compile holds
    out.write_bytes(b"")
    Path(args[args.index("-MF") + 1]).write_text(f"{out}:\n")
else:
    name = out.name.split(".")[0]
    module = out.with_suffix(".c")
    module.write_text(
        "#include <Python.h>\n"
        f"static struct PyModuleDef def = {{PyModuleDef_HEAD_INIT, \"{name}\", NULL, -1, NULL}};\n"
        f"PyMODINIT_FUNC PyInit_{name}(void) {{ return PyModule_Create(&def); }}\n")
    subprocess.run(["cc", "-shared", "-fPIC", "-I" + sysconfig.get_path("include"), str(module),
                    "-o", str(out)], check=True)
"""
FIRST_RUN = """
import sys
import tomllib
from pathlib import Path
from crossview.cpu_kernels import cpu_build
Path(sys.argv[1]).touch()
built = cpu_build._build()
print(built if isinstance(built, str) else built.__file__)
"""


@pytest.mark.skipif(shutil.which("cc") is None or shutil.which("ninja") is None,
                    reason="no C compiler or ninja")
def test_concurrent_first_runs_compile_once_and_share_the_build(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    extensions, started, log = tmp_path / "extensions", tmp_path / "started", tmp_path / "log"
    started.mkdir()
    fake_cxx = _script(tmp_path / "g++", f"#!{sys.executable}\n{FAKE_CXX}")
    monkeypatch.setenv("CXX", fake_cxx)
    name = cpu_build.build_name()
    env = dict(os.environ, TORCH_EXTENSIONS_DIR=str(extensions), FAKE_CXX_LOG=str(log),
               FAKE_CXX_STARTED=str(started))
    runs = [subprocess.Popen([sys.executable, "-c", FIRST_RUN, str(started / str(run))], env=env,
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
            for run in range(2)]
    outputs = [run.communicate(timeout=HANG_GUARD_SECONDS) for run in runs]
    for run, (_, err) in zip(runs, outputs, strict=True):
        assert run.returncode == 0, err
    library = str(extensions / name / f"{name}.so")
    assert [out.strip() for out, _ in outputs] == [library, library]  # both loaded the one build
    assert log.read_text().split() == ["compile"] * len(cpu_build.SOURCES) + ["link"]
    assert [path.name for path in extensions.iterdir()] == [name]


def _missing_compiler(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("CXX", str(tmp_path / "bin" / "c++"))


def _no_ninja(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("CXX", sys.executable)  # found by its path, whatever PATH holds
    monkeypatch.setenv("PATH", str(tmp_path))


def _broken_compiler(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("CXX", _script(tmp_path / "c++", "#!/bin/sh\nexit 1\n"))


def _on(system: str) -> Simulate:
    def simulate(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
        monkeypatch.setattr(platform, "system", lambda: system)

    simulate.__name__ = f"_on_{system}"
    return simulate


@pytest.mark.parametrize(("simulate", "reason"), [
    (_missing_compiler, "no C++ compiler ('{tmp_path}/bin/c++' not found)"),
    (_no_ninja, "ninja is not installed"),
    (_broken_compiler, "the C++ compiler '{tmp_path}/c++' does not run (Command "),
    (_on("Darwin"), "the fused kernels are built on Linux only, not Darwin"),
    (_on("Windows"), "the fused kernels are built on Linux only, not Windows"),
], ids=lambda value: getattr(value, "__name__", ""))
def test_without_a_build_auto_falls_back_with_one_warning(
        simulate: Simulate, reason: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    simulate(monkeypatch, tmp_path)
    # a process that has neither built nor warned yet
    monkeypatch.setattr(cpu_build, "_build", functools.cache(cpu_build._build.__wrapped__))
    monkeypatch.setattr(choose, "_warned", set())
    monkeypatch.setattr(choose, "_default", None)
    monkeypatch.delenv(choose.ENV_VAR, raising=False)
    gen = torch.Generator().manual_seed(0)
    q, k, v = (torch.randn(1, 5, 6, 2, 8, generator=gen) for _ in range(3))
    rel_pos = torch.randn(1, 5, 6, 1, 2, generator=gen)
    with pytest.warns(RuntimeWarning) as record:
        out = match_attention(q, k, v, rel_pos, 1)
        match_attention(q.double(), k.double(), v.double(), rel_pos.double(), 1)
    why = cpu_build.unavailable_reason()
    assert why is not None and why.startswith(f"{BUILD_PROBLEM}: ")
    assert reason.format(tmp_path=tmp_path) in why
    assert [str(warning.message) for warning in record] == [
        f"MatchAttention falls back to the slow reference backend: {why}"]
    assert choose_backend("cpu") == BackendChoice(
        "reference", {"triton": choose_backend("cpu").skipped["triton"], "cpu": why})
    assert torch.equal(out, match_attention(q, k, v, rel_pos, 1, backend="reference"))
    with pytest.raises(RuntimeError, match="backend 'cpu' cannot run: the C\\+\\+ extension"):
        match_attention(q, k, v, rel_pos, 1, backend="cpu")


FALLBACK_RUN = """
import torch
from crossview.attention import match_attention
for dtype in (torch.float32, torch.float64, torch.float32):
    q = torch.randn(1, 4, 4, 1, 2, dtype=dtype)
    match_attention(q, q, q, torch.zeros(1, 4, 4, 1, 2, dtype=dtype), 1)
"""


def test_the_fallback_warning_comes_once_per_process(tmp_path: Path) -> None:
    # PYTHONWARNINGS=always: the warnings module repeats every warning, so once is crossview's
    env = dict(os.environ, CXX=str(tmp_path / "no-c++"), PYTHONWARNINGS="always")
    env.pop(choose.ENV_VAR, None)
    result = subprocess.run([sys.executable, "-c", FALLBACK_RUN], env=env, capture_output=True,
                            text=True, timeout=HANG_GUARD_SECONDS)
    assert result.returncode == 0, result.stderr
    assert result.stderr.count("RuntimeWarning") == 1, result.stderr
    assert "no C++ compiler" in result.stderr


def test_the_march_variable_replaces_native_in_the_compile_flags(
        monkeypatch: pytest.MonkeyPatch) -> None:
    assert "-march=native" in cpu_build.cflags()
    monkeypatch.setenv(cpu_build.MARCH_ENV, "x86-64-v3")
    flags = cpu_build.cflags()
    assert "-march=x86-64-v3" in flags and "-march=native" not in flags
    assert len(flags) == len(cpu_build.CFLAGS)


@can_build
def test_a_march_that_is_no_target_name_is_a_build_problem(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TORCH_EXTENSIONS_DIR", str(tmp_path / "extensions"))
    monkeypatch.setattr(cpp_extension, "load", lambda **kwargs: pytest.fail("built"))
    monkeypatch.setenv(cpu_build.MARCH_ENV, "native -O0")
    reason = cpu_build._build.__wrapped__()  # uncached: the process's own build stays
    assert isinstance(reason, str) and reason.startswith(BUILD_PROBLEM)
    assert f"{cpu_build.MARCH_ENV}='native -O0' is not a -march target name" in reason


@pytest.mark.skipif(cpu_build.unavailable_reason() is not None,
                    reason=f"{cpu_build.unavailable_reason()}")
def test_a_first_run_says_it_compiles(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                      capsys: pytest.CaptureFixture[str]) -> None:
    """``crossview stereo`` in a fresh extensions cache says that it compiles (the compile
    itself is replaced by the kernels built already); a built cache says nothing."""
    built = cpu_build.extension()
    loads = []
    monkeypatch.setattr(cpp_extension, "load", lambda **kwargs: loads.append(kwargs) or built)
    rng = np.random.default_rng(0)
    left = rng.integers(0, 256, (128, 160, 3), dtype=np.uint8)
    Image.fromarray(left).save(tmp_path / "l.png")
    Image.fromarray(np.roll(left, -2, axis=1)).save(tmp_path / "r.png")
    args = ["stereo", str(tmp_path / "l.png"), str(tmp_path / "r.png"), "--model",
            "matchstereo-mini", "--no-refine", "--no-lri"]
    note = f"note: {cpu_build.COMPILE_NOTE}"
    built_cache = os.environ.get("TORCH_EXTENSIONS_DIR")  # where `built` lies: the user's own
    monkeypatch.setenv("TORCH_EXTENSIONS_DIR", str(tmp_path / "fresh"))
    cpu_build._build.cache_clear()
    try:
        code, _, err = run_cli([*args, "-o", str(tmp_path / "first")], capsys)
        assert code == 0 and note in err.splitlines(), err
        assert len(loads) == 1
        cpu_build._build.cache_clear()
        if built_cache is None:
            monkeypatch.delenv("TORCH_EXTENSIONS_DIR")
        else:
            monkeypatch.setenv("TORCH_EXTENSIONS_DIR", built_cache)
        code, _, err = run_cli([*args, "-o", str(tmp_path / "second")], capsys)
        assert code == 0 and note not in err, err
    finally:
        cpu_build._build.cache_clear()


def test_the_package_ships_every_file_of_the_build() -> None:
    pyproject = tomllib.loads((Path(__file__).parents[2] / "pyproject.toml").read_text())
    patterns = pyproject["tool"]["setuptools"]["package-data"]["crossview"]
    package = Path(cpu_build.__file__).parents[1]
    for name in cpu_build.FILES:
        shipped = (cpu_build.CSRC / name).relative_to(package).as_posix()
        assert any(fnmatch.fnmatch(shipped, pattern) for pattern in patterns), shipped
