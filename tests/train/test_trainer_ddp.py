"""Data-parallel training: 2 CPU processes (gloo) end with the parameters of 1 process."""

from __future__ import annotations

import sys
from pathlib import Path

import torch
from ddp_train_worker import standin_trainer
from train_standin import StandInModel

from crossview.train.tensorboard_log import BOARD_DIR
from ranks import finish_ranks, start_ranks

WORKER = str(Path(__file__).with_name("ddp_train_worker.py"))


def test_two_processes_equal_one_with_the_same_global_batch(tmp_path: Path) -> None:
    out_dir = tmp_path / "ddp"
    out_dir.mkdir()
    for code, out, err in finish_ranks(start_ranks([sys.executable, WORKER, str(out_dir)],
                                                   [0, 1], 2)):
        assert code == 0, err
        assert "group threads after run: []" in out, out
    single = standin_trainer(tmp_path / "one")
    single.run()
    rank0 = torch.load(out_dir / "rank0.pt", weights_only=True)
    rank1 = torch.load(out_dir / "rank1.pt", weights_only=True)
    torch.manual_seed(0)
    init = StandInModel().state_dict()
    for key, value in single.model.state_dict().items():
        # float tolerance: Adam turns reduction-order rounding of near-cancelling gradients into
        # small parameter differences, so hold them to 1% of how far the parameters moved
        moved = float((value - init[key]).abs().max())
        assert moved > 1e-3
        torch.testing.assert_close(rank0[key], value, rtol=0, atol=0.01 * moved)
        torch.testing.assert_close(rank1[key], rank0[key], rtol=0, atol=0)
    # rank 0 alone wrote the checkpoint and the log (and its TensorBoard events, if installed)
    names = sorted(p.name for p in out_dir.iterdir() if p.name != BOARD_DIR)
    assert names == ["best.pt", "log.jsonl", "rank0.pt", "rank1.pt", "step-00000003.pt"]
    if (out_dir / BOARD_DIR).exists():
        assert len(list((out_dir / BOARD_DIR).iterdir())) == 1
