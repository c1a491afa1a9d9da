"""One training run per output directory.

Two runs writing one ``train.out_dir`` would overwrite each other's checkpoints and log, and
both end with exit code 0. A run holds an exclusive ``flock`` on the directory itself from
before it touches a file there to its end (:class:`RunLock`); a second run finds it held and
refuses with one line naming the holder's process id (read from ``/proc/locks`` where the
system has it). The kernel drops the lock when its process ends, however it ends: a run killed
with ``kill -9`` leaves nothing that stops the next one (``--resume``), and a lock is never
"stale". The lock puts no file into the directory.

A file system that cannot lock (some network mounts) gets one logged warning, and the run goes
on unguarded.
"""

from __future__ import annotations

import fcntl
import logging
import os
import weakref
from pathlib import Path

from crossview.errors import UserError
from crossview.output import make_directory, remove_empty

log = logging.getLogger(__name__)
PROC_LOCKS = Path("/proc/locks")


class RunLock:
    """The lock on ``run_dir``, taken on construction (the directory is created, with its
    parents, when missing); :meth:`release` lets it go and removes the directories it created
    if they are still empty (a run that failed before writing anything leaves nothing). A lock
    that is garbage-collected unreleased (a dropped :class:`~crossview.train.trainer.Trainer`),
    or still held when the interpreter exits, is released then: nothing can write through it
    any more."""

    def __init__(self, run_dir: str | os.PathLike[str]) -> None:
        self.run_dir = Path(run_dir)
        created = make_directory(self.run_dir)
        fd = os.open(self.run_dir, os.O_RDONLY)
        self._release = weakref.finalize(self, _let_go, fd, created)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = _holder(os.fstat(fd))
            self.release()
            raise UserError(f"{self.run_dir} is in use by another training run ("
                            + (f"process {holder}" if holder else "process id unknown")
                            + "); wait for it to end, or give another train.out_dir "
                            "(--out-dir)") from None
        except OSError as error:
            log.warning(f"cannot lock {self.run_dir} ({error.strerror or error}): nothing stops "
                        "a second training run from writing there at the same time")

    def release(self) -> None:
        """Let the lock go (again: nothing)."""
        self._release()


def _let_go(fd: int, created: list[Path]) -> None:
    os.close(fd)  # the kernel drops the flock with the last descriptor of its file
    remove_empty(created)


def _holder(stat: os.stat_result) -> int | None:
    """The process id that holds a ``flock`` on the file of ``stat``, from ``/proc/locks``
    (``None`` where it cannot be read or does not say)."""
    device = f"{os.major(stat.st_dev):02x}:{os.minor(stat.st_dev):02x}:{stat.st_ino}"
    try:
        lines = PROC_LOCKS.read_text().splitlines()
    except OSError:
        return None
    for line in lines:
        # "1: FLOCK  ADVISORY  WRITE 4242 fe:00:2147185 0 EOF"; waiters carry "->" after the id
        fields = line.split()
        if len(fields) >= 6 and fields[1] == "FLOCK" and fields[5] == device:
            return int(fields[4]) or None  # 0: a process outside this pid namespace
    return None
