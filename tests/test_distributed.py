"""Process-group set-up from torchrun's variables, sharding, and a clean exit of every rank."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from crossview.distributed import DistInfo, init_distributed, shard
from crossview.errors import UserError
from ranks import finish_ranks, start_ranks


@pytest.mark.skipif(not Path("/proc/self/task").is_dir(), reason="needs Linux /proc")
def test_no_group_thread_reaches_interpreter_teardown() -> None:
    # gloo threads left running into teardown can abort a process after its work is done;
    # here torch._dynamo is first imported while the group is open (its modules then
    # capture the group) and an error skips close_distributed. Not through mp.spawn: its
    # processes leave with os._exit, skipping interpreter teardown
    worker = str(Path(__file__).with_name("dist_exit_worker.py"))
    for code, out, err in finish_ranks(start_ranks([sys.executable, worker], [0, 1], 2)):
        assert code == 1 and "UserError: failing with the process group open" in err, err
        opened, at_exit = out.splitlines()
        assert opened != "threads open: []"  # the check below can see the group's threads
        assert at_exit == "threads at exit: []"


def test_shard_splits_the_global_batch() -> None:
    items = list(range(6))
    assert shard(items, DistInfo(0, 2, 0)) == [0, 1, 2]
    assert shard(items, DistInfo(1, 2, 1)) == [3, 4, 5]
    with pytest.raises(UserError, match="divisible"):
        shard(items, DistInfo(0, 4, 0))


def test_single_process_without_torchrun_env(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("WORLD_SIZE", raising=False)
    info = init_distributed("cpu")
    assert info == DistInfo() and info.is_main and not info.enabled
