"""The guard against a stale torch extension build lock (crossview.cpu_kernels.build_lock), alone
and where the fused kernels are loaded (with torch's ``load`` replaced: nothing is compiled)."""

from __future__ import annotations

import os
import shutil
import subprocess
import threading
import time
from collections.abc import Callable
from pathlib import Path
from types import ModuleType

import pytest

from crossview.cpu_kernels import cpu_build
from crossview.cpu_kernels.build_lock import STALE_AFTER_SECONDS, wait_for_build_lock


def _lock(folder: Path, age: float) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    lock = folder / "lock"
    lock.touch()
    then = time.time() - age
    os.utime(lock, (then, then))
    return lock


def test_no_lock_returns_at_once_and_says_nothing(tmp_path: Path,
                                                 log_lines: Callable[[], str]) -> None:
    wait_for_build_lock(tmp_path)
    assert log_lines() == ""


def test_a_stale_lock_is_removed_with_one_warning(tmp_path: Path,
                                                  log_lines: Callable[[], str]) -> None:
    lock = _lock(tmp_path, 2 * STALE_AFTER_SECONDS)
    wait_for_build_lock(tmp_path)
    err = log_lines()
    assert not lock.exists()
    assert err.count("\n") == 1 and err.startswith(f"warning: removed {lock}, "), err


def test_a_fresh_lock_is_waited_for_and_said_once(tmp_path: Path,
                                                  log_lines: Callable[[], str]) -> None:
    lock = _lock(tmp_path, 0)
    builder = threading.Timer(0.3, lock.unlink)  # the other build finishes
    builder.start()
    wait_for_build_lock(tmp_path, poll=0.01)
    builder.join()
    err = log_lines()
    assert err.count("\n") == 1 and err.startswith("note: waiting for another process"), err
    assert str(lock) in err


def test_a_lock_that_grows_stale_while_waiting_is_removed(
        tmp_path: Path, log_lines: Callable[[], str]) -> None:
    lock = _lock(tmp_path, 0)  # the build holding it is killed: nobody removes it
    wait_for_build_lock(tmp_path, stale_after=0.2, poll=0.01)
    assert not lock.exists()
    lines = log_lines().splitlines()
    assert len(lines) == 2 and lines[0].startswith("note: waiting")
    assert lines[1].startswith(f"warning: removed {lock}")


def test_a_lock_held_by_a_live_build_is_kept_however_old(
        tmp_path: Path, log_lines: Callable[[], str]) -> None:
    lock = _lock(tmp_path, 100 * STALE_AFTER_SECONDS)  # a compile on a starved machine
    builder = subprocess.Popen(["sleep", "60"], cwd=tmp_path)  # works in the build directory
    seen = []

    def finish() -> None:
        seen.append(lock.exists())
        builder.terminate()
        builder.wait()

    timer = threading.Timer(0.5, finish)
    timer.start()
    wait_for_build_lock(tmp_path, poll=0.01)
    timer.join()
    assert seen == [True]  # still there while the build ran
    lines = log_lines().splitlines()
    assert len(lines) == 2 and lines[0].startswith("note: waiting"), lines
    assert lines[1].startswith(f"warning: removed {lock}")


@pytest.mark.skipif(shutil.which(os.environ.get("CXX", "c++")) is None
                    or shutil.which("ninja") is None, reason="no C++ compiler or ninja")
def test_the_kernel_loader_clears_a_stale_lock_before_loading(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        log_lines: Callable[[], str]) -> None:
    import torch.utils.cpp_extension as cpp_extension

    monkeypatch.setenv("TORCH_EXTENSIONS_DIR", str(tmp_path))
    build_dir = tmp_path / cpu_build.build_name()
    lock = _lock(build_dir, 2 * STALE_AFTER_SECONDS)
    calls = []
    module = ModuleType("fake_kernels")

    def fake_load(**kwargs: object) -> ModuleType:
        calls.append((kwargs.get("build_directory"), lock.exists()))
        return module

    monkeypatch.setattr(cpp_extension, "load", fake_load)
    assert cpu_build._build.__wrapped__() is module  # the uncached build, with the fake load
    assert calls == [(str(build_dir), False)]  # in torch's build directory, lock gone first
    err = log_lines().splitlines()  # the lock goes, then a compile is announced
    assert len(err) == 2 and err[0].startswith(f"warning: removed {lock}"), err
    assert err[1] == f"note: {cpu_build.COMPILE_NOTE}"
