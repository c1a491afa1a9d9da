"""Launch test processes as the ranks of a torch.distributed job, as torchrun would.

Each process gets torchrun's variables (``RANK``, ``LOCAL_RANK``, ``WORLD_SIZE``,
``MASTER_ADDR``, ``MASTER_PORT``) and one thread; :func:`finish_ranks` kills them all when one
hangs, so a rank left waiting for its peers fails a test instead of stalling the suite.
"""

from __future__ import annotations

import os
import socket
import subprocess

from hang_guard import HANG_GUARD_SECONDS


def free_port() -> int:
    """A TCP port on 127.0.0.1 that nothing listens on, for the process group's store."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def start_ranks(argv: list[str], ranks: list[int], world: int) -> list[subprocess.Popen]:
    """Start ``argv`` as the given ranks of ``world`` processes (text stdout/stderr piped)."""
    port = str(free_port())
    return [subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                             env={**os.environ, "RANK": str(rank), "LOCAL_RANK": str(rank),
                                  "WORLD_SIZE": str(world), "MASTER_ADDR": "127.0.0.1",
                                  "MASTER_PORT": port, "OMP_NUM_THREADS": "1"})
            for rank in ranks]


def finish_ranks(procs: list[subprocess.Popen]) -> list[tuple[int, str, str]]:
    """``(exit code, stdout, stderr)`` of each process; kills them all after
    :data:`~hang_guard.HANG_GUARD_SECONDS`."""
    try:
        outputs = [p.communicate(timeout=HANG_GUARD_SECONDS) for p in procs]
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
    return [(p.returncode, out, err) for p, (out, err) in zip(procs, outputs, strict=True)]
