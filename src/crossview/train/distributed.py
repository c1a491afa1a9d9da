"""torch.distributed set-up from torchrun's environment, per-rank sharding, rank-0-only writes.

``torchrun --nproc-per-node N -m crossview train CONFIG`` sets ``RANK``, ``WORLD_SIZE``,
``LOCAL_RANK``, ``MASTER_ADDR`` and ``MASTER_PORT``; :func:`init_distributed` reads them and
opens a process group (gloo on CPU, nccl on CUDA). Without them, it is a single process and
nothing is initialised.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

import torch
import torch.distributed as dist

from crossview.errors import UserError


@dataclass(frozen=True)
class DistInfo:
    """Where this process sits: ``rank`` of ``world_size``, ``local_rank`` on its machine."""

    rank: int = 0
    world_size: int = 1
    local_rank: int = 0

    @property
    def is_main(self) -> bool:
        """Rank 0 writes checkpoints, logs and progress; the others only compute."""
        return self.rank == 0

    @property
    def enabled(self) -> bool:
        return self.world_size > 1


def init_distributed(device: str) -> DistInfo:
    """Open the process group described by torchrun's environment variables, if any.

    Returns the process's :class:`DistInfo`. On CUDA, the process uses ``cuda:LOCAL_RANK``.
    """
    world_size = int(os.environ.get("WORLD_SIZE", "1"))
    if world_size <= 1:
        return DistInfo()
    rank = int(os.environ["RANK"])
    local_rank = int(os.environ.get("LOCAL_RANK", "0"))
    backend = "nccl" if device.startswith("cuda") else "gloo"
    if backend == "nccl":
        if not torch.cuda.is_available():
            raise UserError("device is cuda but CUDA is not available")
        torch.cuda.set_device(local_rank)
    if not dist.is_initialized():
        dist.init_process_group(backend=backend, rank=rank, world_size=world_size)
    return DistInfo(rank=rank, world_size=world_size, local_rank=local_rank)


def close_distributed(info: DistInfo) -> None:
    """Tear down the process group opened by :func:`init_distributed`."""
    if info.enabled and dist.is_initialized():
        dist.destroy_process_group()


def shard(items: list[int], info: DistInfo) -> list[int]:
    """This rank's contiguous share of a global batch (``len(items)`` divisible by world size)."""
    if len(items) % info.world_size:
        raise UserError(f"the global batch ({len(items)}) must be divisible by the number of "
                        f"processes ({info.world_size})")
    per_rank = len(items) // info.world_size
    return items[info.rank * per_rank:(info.rank + 1) * per_rank]


def all_reduce_sum(values: torch.Tensor, info: DistInfo) -> torch.Tensor:
    """Sum a tensor over all ranks (a no-op for one process)."""
    if info.enabled:
        values = values.clone()
        dist.all_reduce(values, op=dist.ReduceOp.SUM)
    return values


def barrier(info: DistInfo) -> None:
    """Wait for every rank (a no-op for one process)."""
    if info.enabled:
        dist.barrier()
