"""Output locations: checked before the work, published all together or not at all."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import textwrap
import warnings
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest

from crossview.errors import UserError
from crossview.output import atomic_output, check_finite, check_output_files, staged_files
from hang_guard import HANG_GUARD_SECONDS


def _listing(root: Path) -> dict[str, bytes | None]:
    return {str(p.relative_to(root)): p.read_bytes() if p.is_file() else None
            for p in sorted(root.rglob("*"))}


def test_files_appear_only_when_the_block_succeeds(tmp_path: Path) -> None:
    out = tmp_path / "out"
    out.mkdir()
    (out / "a.txt").write_text("old")
    with staged_files([out / "a.txt", out / "b.txt", tmp_path / "new" / "c.txt"]) as staged:
        for path, text in zip(staged, ("new", "b", "c"), strict=True):
            path.write_text(text)
        assert (out / "a.txt").read_text() == "old"  # nothing published yet
        assert not (out / "b.txt").exists() and not (tmp_path / "new" / "c.txt").exists()
    assert _listing(tmp_path) == {"out": None, "out/a.txt": b"new", "out/b.txt": b"b",
                                  "new": None, "new/c.txt": b"c"}


@pytest.mark.parametrize("failure", [KeyboardInterrupt, UserError, RuntimeError])
@pytest.mark.parametrize("exists", [True, False])
def test_a_failed_block_leaves_the_file_system_as_it_was(tmp_path: Path, exists: bool,
                                                         failure: type[BaseException]) -> None:
    out = tmp_path / "new" / "out"
    if exists:
        out.mkdir(parents=True)
        (out / "a.txt").write_text("old")
    before = _listing(tmp_path)
    with pytest.raises(failure), staged_files([out / "a.txt", tmp_path / "x" / "b.txt"]) as (
            a, b):
        a.write_text("new")
        b.write_text("b")
        raise failure  # an interruption half-way counts as a failure too
    assert _listing(tmp_path) == before


def test_a_file_left_unwritten_publishes_nothing(tmp_path: Path) -> None:
    with pytest.raises(RuntimeError, match=r"b\.txt was staged but never written"), \
            staged_files([tmp_path / "a.txt", tmp_path / "b.txt"]) as (a, _):
        a.write_text("a")
    assert _listing(tmp_path) == {}


@pytest.mark.parametrize("when", ["before", "during"])
def test_an_output_name_taken_by_a_directory_publishes_nothing(tmp_path: Path,
                                                               when: str) -> None:
    ran = []
    if when == "before":
        (tmp_path / "b.txt").mkdir()
    with pytest.raises(UserError, match=rf"^{tmp_path / 'b.txt'}: is a directory; cannot "
                       "write an output file of that name$"), \
            staged_files([tmp_path / "a.txt", tmp_path / "b.txt"]) as (a, b):
        ran.append(True)
        a.write_text("a")
        b.write_text("b")
        (tmp_path / "b.txt").mkdir()
    assert _listing(tmp_path) == {"b.txt": None}
    assert ran == ([True] if when == "during" else [])  # found before the work


@pytest.mark.parametrize(("where", "message"), [
    ("{tmp}/taken", "{tmp}/taken: is a directory; cannot write an output file of that name"),
    ("{tmp}/file/out.json", "{tmp}/file: exists and is not a directory"),
    ("/proc/crossview-out/out.json", "/proc/crossview-out: cannot write to this output "
                                     "directory"),
])
def test_check_output_files_names_the_bad_path_and_creates_nothing(
        tmp_path: Path, where: str, message: str) -> None:
    (tmp_path / "taken").mkdir()
    (tmp_path / "file").write_text("x")
    before = _listing(tmp_path)
    with pytest.raises(UserError, match="^" + message.format(tmp=tmp_path)):
        check_output_files([tmp_path / "deeper" / "fine.json", where.format(tmp=tmp_path)])
    assert _listing(tmp_path) == before


_KILLED_MID_BLOCK = """
import os, signal, sys
from crossview.output import atomic_output
from crossview.output import staged_files
with staged_files([sys.argv[1] + "/a.txt"]) as (a,):
    a.write_text("half done")
    with atomic_output(sys.argv[1] + "/b.png") as tmp:
        tmp.write_text("half written")
        print(a.parent.name, tmp.name, flush=True)
        os.kill(os.getpid(), signal.SIGKILL)
"""


def test_a_later_run_removes_the_temporaries_left_by_a_killed_run(
        tmp_path: Path, log_lines: Callable[[], str]) -> None:
    out = tmp_path / "out"
    with subprocess.Popen([sys.executable, "-c", _KILLED_MID_BLOCK, str(out)],
                          stdout=subprocess.PIPE, text=True) as killed:
        names, _ = killed.communicate(timeout=HANG_GUARD_SECONDS)
    assert killed.returncode == -signal.SIGKILL
    left = [out / name for name in names.split()]
    assert (left[0] / "a.txt").read_text() == "half done"  # what kill -9 leaves behind
    assert left[1].read_text() == "half written"
    host = socket.gethostname()
    with subprocess.Popen([sys.executable, "-c", f"import time; time.sleep({HANG_GUARD_SECONDS})"]
                          ) as alive:  # killed below; it must outlive a slow block
        try:
            kept = [out / f".crossview-staging-{host}-{alive.pid}-abcd1234",  # owner running
                    out / f".crossview-staging-otherhost-{killed.pid}-abcd1234",  # not ours
                    out / ".crossview-staging-k2j4h5g6",  # no owner recorded: cannot tell
                    out / f".crossview-tmp-otherhost-{killed.pid}-abcd1234.png",
                    out / f".notes-{killed.pid}.txt"]  # not a name of ours
            for path in kept:
                path.mkdir() if "staging" in path.name else path.write_text("keep")
            with staged_files([out / "c.txt"]) as (c,):
                c.write_text("c")
        finally:
            alive.kill()
    assert not any(path.exists() for path in left)
    assert sorted(p.name for p in out.iterdir()) == sorted(["c.txt", *(p.name for p in kept)])
    err = log_lines()
    assert err.count("warning:") == 2 and all(str(path) in err for path in left)
    # the temporaries record their owner: host and process id
    assert all(p.name.startswith(f".crossview-{kind}-{host}-{killed.pid}-")
               for p, kind in zip(left, ("staging", "tmp"), strict=True))
    assert c.parent.name.startswith(f".crossview-staging-{host}-{os.getpid()}-")
    with atomic_output(out / "d.png") as tmp:
        assert tmp.name.startswith(f".crossview-tmp-{host}-{os.getpid()}-")
        assert tmp.suffix == ".png"  # writers that infer the format from the suffix still work
        tmp.write_text("d")


_SIGNAL_DURING = textwrap.dedent("""
    import os, signal, sys, time
    from crossview.output import Terminated, staged_files
    out, when = sys.argv[1], sys.argv[2]
    replace = os.replace
    def replace_then_signal(source, target):  # SIGTERM while the first file is published
        replace(source, target)
        os.kill(os.getpid(), signal.SIGTERM)
        time.sleep(0.2)  # the handler would run here if the signal were not held back
    try:
        with staged_files([out + "/a.txt", out + "/b.txt"]) as (a, b):
            a.write_text("a")
            b.write_text("b")
            if when == "work":
                os.kill(os.getpid(), signal.SIGTERM)
                time.sleep(60)
            os.replace = replace_then_signal
    except Terminated as stop:
        print(stop)
        sys.exit(3)
""")


@pytest.mark.parametrize(("when", "published"), [("work", []), ("publish", ["a.txt", "b.txt"])])
def test_sigterm_discards_a_block_at_work_and_waits_for_publishing(
        tmp_path: Path, when: str, published: list[str]) -> None:
    out = tmp_path / "out"
    result = subprocess.run([sys.executable, "-c", _SIGNAL_DURING, str(out), when],
                            capture_output=True, text=True, timeout=HANG_GUARD_SECONDS)
    assert result.returncode == 3, result.stderr
    assert result.stdout == "stopped by SIGTERM; outputs not yet published were discarded\n"
    listing = sorted(p.name for p in out.iterdir()) if out.exists() else []
    assert listing == published  # no staging directory either


@pytest.mark.parametrize(("values", "where", "bad"), [
    (np.array([1.0, np.nan, 3.0]), None, 1),
    (np.array([1.0, np.inf, -np.inf]), None, 2),
    (np.array([1.0, 1e39, -1e300]), None, 2),  # finite as float64, infinite as float32
    (np.array([[np.nan, 1.0], [2.0, 3.0]]), np.array([[True, True], [False, True]]), 1),
    (np.full((2, 2, 2), np.nan), np.array([[True, False], [False, False]])[..., None], 2),
])
def test_check_finite_counts_what_float32_cannot_hold(values: np.ndarray,
                                                      where: np.ndarray | None,
                                                      bad: int) -> None:
    total = values.size if where is None else int(np.broadcast_to(where, values.shape).sum())
    with pytest.raises(UserError) as refused, warnings.catch_warnings():
        warnings.simplefilter("error")  # no numpy overflow warning on the way
        check_finite(values, "the depth of calib.txt", where)
    assert str(refused.value) == f"the depth of calib.txt ({bad} of {total} values)"


def test_check_finite_passes_what_is_finite_where_it_matters() -> None:
    check_finite(np.array([1.0, -3.4e38, 3.4e38], np.float64), "x")
    check_finite(np.array([np.nan, 2.0]), "x", np.array([False, True]))
    check_finite(np.zeros((0, 3)), "x")
