"""Another process holding the lock on a training run directory
(:class:`crossview.train.run_lock.RunLock`), for the tests of a second run."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

# holds the lock on argv[1] until killed
_HOLD = textwrap.dedent("""
    import sys, time
    from crossview.train.run_lock import RunLock
    lock = RunLock(sys.argv[1])
    print("locked", flush=True)
    time.sleep(600)
""")


def hold_lock(run_dir: Path) -> subprocess.Popen:
    """A process holding the lock on ``run_dir`` (returned once it does); kill it when done."""
    process = subprocess.Popen([sys.executable, "-c", _HOLD, str(run_dir)],
                               stdout=subprocess.PIPE, text=True)
    line = process.stdout.readline()
    assert line == "locked\n", f"the holder did not lock {run_dir}"
    return process
