"""One rank of a data-parallel :class:`~crossview.train.trainer.Trainer` run on the stand-in.

The test launches it once per rank with torchrun's environment variables set
(``python ddp_train_worker.py OUT_DIR``); each rank trains and saves its parameters as
``rankR.pt`` in ``OUT_DIR``. :func:`standin_trainer` is importable so that the test runs the
one-process reference with the same settings.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

import torch
from train_standin import StandInModel, StandInStereo

from crossview.train.config import config_from_dict
from crossview.train.trainer import Trainer

sys.path.insert(0, str(Path(__file__).parents[1]))  # tests/, when run as a script
from dist_exit_worker import group_threads

GLOBAL_BATCH = 4


def standin_trainer(out_dir: Path) -> Trainer:
    """A trainer of the stand-in (seed 0) for 3 steps of the global batch, with a checkpoint and
    a validation at step 3, writing to ``out_dir``; under torchrun's variables, one rank of it."""
    cfg = config_from_dict({"train": {"steps": 3, "batch_size": GLOBAL_BATCH,
                                      "out_dir": str(out_dir), "ckpt_every": 3, "val_every": 3},
                            "optim": {"lr": 1e-2, "pct_start": 0.3}})
    torch.manual_seed(0)
    return Trainer(cfg, model=StandInModel(), train_set=StandInStereo(),
                   val_set=StandInStereo(3), progress=False)


def main(out_dir: Path) -> None:
    trainer = standin_trainer(out_dir)
    trainer.run()
    # run() has torn the process group down: none of its threads outlive it (left to the
    # garbage collection of DistributedDataParallel's reducer, the group's destructor could
    # wait for a gloo thread that waits for the GIL: a hang at exit)
    print(f"group threads after run: {group_threads()}", flush=True)
    torch.save(trainer.model.state_dict(), out_dir / f"rank{os.environ['RANK']}.pt")


if __name__ == "__main__":
    main(Path(sys.argv[1]))
