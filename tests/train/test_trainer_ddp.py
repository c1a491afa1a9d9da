"""Data-parallel training: 2 CPU processes (gloo) end with the parameters of 1 process."""

from __future__ import annotations

import os
from pathlib import Path

import torch
import torch.multiprocessing as mp
from train_standin import StandInModel, StandInStereo

from crossview.train.config import config_from_dict
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


def test_two_processes_equal_one_with_the_same_global_batch(tmp_path: Path, free_port: int) -> None:
    mp.spawn(_worker, args=(2, free_port, str(tmp_path / "ddp")), nprocs=2, join=True)
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
