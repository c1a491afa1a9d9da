"""Output locations: all-or-nothing staging of a command's files."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from crossview.errors import UserError
from crossview.output import staged_outputs
from hang_guard import HANG_GUARD_SECONDS


def _listing(root: Path) -> dict[str, bytes | None]:
    return {str(p.relative_to(root)): p.read_bytes() if p.is_file() else None
            for p in sorted(root.rglob("*"))}


def test_files_appear_only_when_the_block_succeeds(tmp_path: Path) -> None:
    out = tmp_path / "out"
    out.mkdir()
    (out / "a.txt").write_text("old")
    with staged_outputs(out) as staging:
        (staging / "a.txt").write_text("new")
        (staging / "b.txt").write_text("b")
        assert _listing(out).keys() == {"a.txt", staging.name, f"{staging.name}/a.txt",
                                        f"{staging.name}/b.txt"}
        assert (out / "a.txt").read_text() == "old"  # nothing published yet
    assert _listing(out) == {"a.txt": b"new", "b.txt": b"b"}


@pytest.mark.parametrize("exists", [True, False])
def test_a_failed_block_leaves_the_directory_as_it_was(tmp_path: Path, exists: bool) -> None:
    out = tmp_path / "new" / "out"
    if exists:
        out.mkdir(parents=True)
        (out / "a.txt").write_text("old")
    before = _listing(tmp_path)
    with pytest.raises(KeyboardInterrupt), staged_outputs(out) as staging:
        (staging / "a.txt").write_text("new")
        raise KeyboardInterrupt  # an interruption half-way counts as a failure too
    assert _listing(tmp_path) == before


def test_an_output_name_taken_by_a_directory_publishes_nothing(tmp_path: Path) -> None:
    (tmp_path / "b.txt").mkdir()
    with pytest.raises(UserError, match=r"b\.txt: is a directory"), \
            staged_outputs(tmp_path) as staging:
        (staging / "a.txt").write_text("a")
        (staging / "b.txt").write_text("b")
    assert _listing(tmp_path) == {"b.txt": None}


_KILLED_MID_BLOCK = """
import os, signal, sys
from crossview.output import staged_outputs
with staged_outputs(sys.argv[1]) as staging:
    (staging / "a.txt").write_text("half done")
    print(staging.name, flush=True)
    os.kill(os.getpid(), signal.SIGKILL)
"""


def test_a_later_run_removes_the_staging_left_by_a_killed_run(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "out"
    with subprocess.Popen([sys.executable, "-c", _KILLED_MID_BLOCK, str(out)],
                          stdout=subprocess.PIPE, text=True) as killed:
        name, _ = killed.communicate(timeout=HANG_GUARD_SECONDS)
    assert killed.returncode == -signal.SIGKILL
    left = out / name.strip()
    assert (left / "a.txt").read_text() == "half done"  # what kill -9 leaves behind
    host = socket.gethostname()
    with subprocess.Popen([sys.executable, "-c", f"import time; time.sleep({HANG_GUARD_SECONDS})"]
                          ) as alive:  # killed below; it must outlive a slow block
        try:
            kept = [out / f".crossview-staging-{host}-{alive.pid}-abcd1234",  # owner running
                    out / f".crossview-staging-otherhost-{killed.pid}-abcd1234",  # not ours
                    out / ".crossview-staging-k2j4h5g6"]  # no owner recorded: cannot tell
            for path in kept:
                path.mkdir()
            with staged_outputs(out) as staging:
                (staging / "b.txt").write_text("b")
        finally:
            alive.kill()
    assert not left.exists()
    assert sorted(p.name for p in out.iterdir()) == sorted(["b.txt", *(p.name for p in kept)])
    err = capsys.readouterr().err
    assert err.count("warning:") == 1 and str(left) in err
    # the staging directories record their owner: host and process id
    assert left.name.startswith(f".crossview-staging-{host}-{killed.pid}-")
    assert staging.name.startswith(f".crossview-staging-{host}-{os.getpid()}-")
