"""One rank that opens the process group, imports ``torch._dynamo`` (as the first call of a
``torch.library`` custom op in a model's forward does) and fails before closing the group
(launched by ``test_distributed.py`` with torchrun's environment variables set).

The handler registered first runs last at exit: it prints the names of the threads of gloo and
of the TCP store still running at that point, just before the interpreter tears down.
"""

from __future__ import annotations

import atexit
from pathlib import Path


def group_threads() -> list[str]:
    """Names of this process's threads that belong to gloo or the TCP store."""
    names = [(task / "comm").read_text().strip() for task in Path("/proc/self/task").iterdir()]
    return [name for name in names if "gloo" in name or "tcpstore" in name]


if __name__ == "__main__":
    atexit.register(lambda: print(f"threads at exit: {group_threads()}", flush=True))
    from crossview.distributed import init_distributed
    from crossview.errors import UserError

    init_distributed("cpu")
    print(f"threads open: {group_threads()}", flush=True)
    import torch._dynamo  # noqa: F401

    raise UserError("failing with the process group open")
