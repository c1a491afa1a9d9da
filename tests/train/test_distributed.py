from __future__ import annotations

import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest
import torch
import torch.multiprocessing as mp
from train_standin import StandInModel, StandInStereo

from crossview.errors import UserError
from crossview.train.config import config_from_dict
from crossview.train.distributed import DistInfo, init_distributed, shard
from crossview.train.trainer import Trainer


def _cfg(out_dir: Path, batch_size: int):
    return config_from_dict({"train": {"steps": 3, "batch_size": batch_size,
                                       "out_dir": str(out_dir), "ckpt_every": 3,
                                       "val_every": 3},
                             "optim": {"lr": 1e-2, "pct_start": 0.3}})


def _worker(rank: int, world: int, port: int, out_dir: str) -> None:
    os.environ.update(RANK=str(rank), WORLD_SIZE=str(world), LOCAL_RANK=str(rank),
                      MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    torch.set_num_threads(1)
    torch.manual_seed(0)
    trainer = Trainer(_cfg(Path(out_dir), 4), model=StandInModel(), train_set=StandInStereo(),
                      val_set=StandInStereo(3), progress=False)
    trainer.run()
    torch.save(trainer.model.state_dict(), Path(out_dir) / f"rank{rank}.pt")


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_two_processes_equal_one_with_the_same_global_batch(tmp_path: Path) -> None:
    mp.spawn(_worker, args=(2, _free_port(), str(tmp_path / "ddp")), nprocs=2, join=True)
    torch.manual_seed(0)
    single = Trainer(_cfg(tmp_path / "one", 4), model=StandInModel(),
                     train_set=StandInStereo(), val_set=StandInStereo(3), progress=False)
    single.run()
    rank0 = torch.load(tmp_path / "ddp" / "rank0.pt", weights_only=True)
    rank1 = torch.load(tmp_path / "ddp" / "rank1.pt", weights_only=True)
    torch.manual_seed(0)
    init = StandInModel().state_dict()
    for key, value in single.model.state_dict().items():
        # float tolerance: Adam turns reduction-order rounding of near-cancelling gradients into
        # small parameter differences, so hold them to 1% of how far the parameters moved
        moved = float((value - init[key]).abs().max())
        assert moved > 1e-3
        torch.testing.assert_close(rank0[key], value, rtol=0, atol=0.01 * moved)
        torch.testing.assert_close(rank1[key], rank0[key], rtol=0, atol=0)
    # rank 0 alone wrote the checkpoint and the log
    assert sorted(p.name for p in (tmp_path / "ddp").iterdir()) == [
        "best.pt", "log.jsonl", "rank0.pt", "rank1.pt", "step-00000003.pt"]


@pytest.mark.skipif(not Path("/proc/self/task").is_dir(), reason="needs Linux /proc")
def test_no_group_thread_reaches_interpreter_teardown() -> None:
    # gloo threads left running into teardown can abort a process after its work is done;
    # here torch._dynamo is first imported while the group is open (its modules then
    # capture the group) and an error skips close_distributed. Not through mp.spawn: its
    # processes leave with os._exit, skipping interpreter teardown
    port = str(_free_port())
    worker = str(Path(__file__).with_name("dist_exit_worker.py"))
    procs = [subprocess.Popen([sys.executable, worker],
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                              env={**os.environ, "RANK": str(rank), "LOCAL_RANK": str(rank),
                                   "WORLD_SIZE": "2", "MASTER_ADDR": "127.0.0.1",
                                   "MASTER_PORT": port, "OMP_NUM_THREADS": "1"})
             for rank in (0, 1)]
    try:
        runs = [(p.communicate(timeout=120), p.returncode) for p in procs]
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
    for (out, err), code in runs:
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
