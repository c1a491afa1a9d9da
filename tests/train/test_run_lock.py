"""``crossview.train.run_lock``: one training run per output directory; a second one refuses
naming the holder, a killed holder's lock is gone, and the lock leaves nothing behind."""

from __future__ import annotations

import os
import signal
from pathlib import Path

import pytest
from run_lock_holder import hold_lock

from crossview.errors import UserError
from crossview.train.run_lock import RunLock
from hang_guard import HANG_GUARD_SECONDS


def _refusal(run_dir: Path, pid: int) -> str:
    return (f"{run_dir} is in use by another training run (process {pid}); wait for it to end, "
            "or give another train.out_dir (--out-dir)")


def test_a_lock_held_by_another_process_is_refused_until_it_is_killed(tmp_path: Path) -> None:
    run_dir = tmp_path / "run"
    process = hold_lock(run_dir)
    try:
        with pytest.raises(UserError) as refused:
            RunLock(run_dir)
        assert str(refused.value) == _refusal(run_dir, process.pid)
        assert list(run_dir.iterdir()) == []  # the lock is on the directory: no file of its own
    finally:
        process.send_signal(signal.SIGKILL)
        process.wait(HANG_GUARD_SECONDS)
    RunLock(run_dir).release()  # kill -9 left nothing that stops the next run


def test_one_process_cannot_hold_it_twice_and_release_lets_go(tmp_path: Path) -> None:
    first = RunLock(tmp_path / "run")
    with pytest.raises(UserError) as refused:
        RunLock(tmp_path / "run")
    assert str(refused.value) == _refusal(tmp_path / "run", os.getpid())
    first.release()
    first.release()  # again: nothing
    RunLock(tmp_path / "run").release()


def test_a_directory_it_created_goes_if_nothing_was_written(tmp_path: Path) -> None:
    lock = RunLock(tmp_path / "a" / "run")
    assert (tmp_path / "a" / "run").is_dir()
    lock.release()
    assert list(tmp_path.iterdir()) == []
    lock = RunLock(tmp_path / "a" / "run")
    (tmp_path / "a" / "run" / "log.jsonl").write_text("{}\n")
    lock.release()
    assert (tmp_path / "a" / "run" / "log.jsonl").is_file()


def test_a_run_directory_that_cannot_be_made_is_one_user_error(tmp_path: Path) -> None:
    (tmp_path / "blocker").write_text("a file")
    with pytest.raises(UserError, match="blocker: exists and is not a directory"):
        RunLock(tmp_path / "blocker" / "run")


def test_a_lock_dropped_unreleased_lets_go(tmp_path: Path) -> None:
    RunLock(tmp_path / "run")  # garbage at once, as a Trainer(...).save() leaves its lock
    assert not (tmp_path / "run").exists()  # it made the directory, which stayed empty
    RunLock(tmp_path / "run").release()
