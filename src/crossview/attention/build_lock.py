"""A guard against the lock file that a killed torch C++ extension build leaves behind.

``torch.utils.cpp_extension.load`` serialises the builds of one extension with an empty lock
file, ``BUILD_DIR/lock`` (torch's ``FileBaton``): the process that creates it compiles, every
other one sleeps until the file disappears. A compile that is killed (Ctrl-C at the wrong
moment, the OOM killer, ``kill -9``) leaves the file behind, and every later process then waits
forever without a word. :func:`wait_for_build_lock` runs before ``load``: it says once that it
waits for another build, and removes a lock older than :data:`STALE_AFTER_SECONDS` with one
warning line naming it.
"""

from __future__ import annotations

import contextlib
import os
import sys
import time
from pathlib import Path

# Compiling the fused MatchAttention kernels takes about a minute on one core, a few minutes on
# a loaded machine; a lock ten minutes old is taken as left over from a killed build.
STALE_AFTER_SECONDS = 600.0


def wait_for_build_lock(build_dir: str | os.PathLike[str], *,
                        stale_after: float = STALE_AFTER_SECONDS, poll: float = 0.5) -> None:
    """Return once ``build_dir/lock`` does not exist, removing it if it is (or becomes) older
    than ``stale_after`` seconds. Messages go to stderr, one line each: a note when it starts
    waiting, a warning naming the lock when it removes one."""
    lock = Path(build_dir) / "lock"
    told = False
    while (age := _age(lock)) is not None:
        if age >= stale_after:
            with contextlib.suppress(FileNotFoundError):
                lock.unlink()
            _say(f"warning: removed {lock}, a torch extension build lock {age:.0f} s old left by "
                 f"a killed build (locks older than {stale_after:.0f} s are taken as stale)")
            return
        if not told:
            _say(f"note: waiting for another process to finish compiling the fused kernels "
                 f"(lock {lock}, {age:.0f} s old; taken as stale after {stale_after:.0f} s)")
            told = True
        time.sleep(poll)


def _age(lock: Path) -> float | None:
    """Seconds since ``lock`` was created (torch never writes to it), or None if it is gone."""
    try:
        return time.time() - lock.stat().st_mtime
    except FileNotFoundError:
        return None


def _say(message: str) -> None:
    print(message, file=sys.stderr, flush=True)
