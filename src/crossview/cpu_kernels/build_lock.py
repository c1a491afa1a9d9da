"""A guard against the lock file that a killed torch C++ extension build leaves behind.

``torch.utils.cpp_extension.load`` serialises the builds of one extension with an empty lock
file, ``BUILD_DIR/lock`` (torch's ``FileBaton``): the process that creates it compiles, every
other one sleeps until the file disappears. A compile that is killed (Ctrl-C at the wrong
moment, the OOM killer, ``kill -9``) leaves the file behind, and every later process then waits
forever without a word. :func:`wait_for_build_lock` runs before ``load``: it logs once that it
waits for another build, and removes a stale lock with one warning naming it (logger
``crossview.cpu_kernels.build_lock``).

A lock is stale when it is older than :data:`STALE_AFTER_SECONDS` and no process works in the
build directory (ninja and the compiler run there; seen through ``/proc/*/cwd`` on Linux). Age
alone cannot tell: on a loaded machine a live compile can take far longer than usual. Without
``/proc`` a lock is taken as stale after :data:`UNVERIFIED_STALE_AFTER_SECONDS`.
"""

from __future__ import annotations

import contextlib
import logging
import os
import time
from pathlib import Path

# torch creates the lock, writes build.ninja, then starts ninja; a younger lock may be between.
STALE_AFTER_SECONDS = 60.0
UNVERIFIED_STALE_AFTER_SECONDS = 3600.0

log = logging.getLogger(__name__)


def wait_for_build_lock(build_dir: str | os.PathLike[str], *,
                        stale_after: float = STALE_AFTER_SECONDS, poll: float = 0.5) -> None:
    """Return once ``build_dir/lock`` does not exist, removing it when it is (or becomes)
    stale (see the module docstring). It logs an INFO record when it starts waiting and a
    WARNING naming the lock when it removes one."""
    lock = Path(build_dir) / "lock"
    told = False
    while (age := _age(lock)) is not None:
        if _stale(age, _someone_works_in(Path(build_dir)), stale_after):
            with contextlib.suppress(FileNotFoundError):
                lock.unlink()
            log.warning(f"removed {lock}, a torch extension build lock {age:.0f} s old that no "
                 "running build holds (left by a killed build)")
            return
        if not told:
            log.info(f"waiting for another process to finish compiling the fused kernels "
                 f"(lock {lock}, {age:.0f} s old)")
            told = True
        time.sleep(poll)


def _stale(age: float, busy: bool | None, stale_after: float) -> bool:
    if busy is None:  # no /proc: only the age can tell
        return age >= UNVERIFIED_STALE_AFTER_SECONDS
    return not busy and age >= stale_after


def _someone_works_in(directory: Path) -> bool | None:
    """Whether a process has its working directory in ``directory`` (None: cannot tell)."""
    proc = Path("/proc")
    if not proc.is_dir():
        return None
    target = os.path.realpath(directory)
    for entry in proc.iterdir():
        if not entry.name.isdigit():
            continue
        try:
            cwd = os.readlink(entry / "cwd")
        except OSError:  # gone, a zombie, or another user's
            continue
        if cwd == target or cwd.startswith(target + os.sep):
            return True
    return False


def _age(lock: Path) -> float | None:
    """Seconds since ``lock`` was created (torch never writes to it), or None if it is gone."""
    try:
        return time.time() - lock.stat().st_mtime
    except FileNotFoundError:
        return None

