"""torch.distributed set-up from torchrun's environment, per-rank sharding, rank-0-only writes.

``torchrun --nproc-per-node N -m crossview train CONFIG`` (or ``... eval ...``) sets ``RANK``,
``WORLD_SIZE``, ``LOCAL_RANK``, ``MASTER_ADDR`` and ``MASTER_PORT``; :func:`dist_info_from_env`
reads them and :func:`init_distributed` opens a process group (gloo on CPU, nccl on CUDA).
Without them, it is a single process and nothing is initialised. Training splits each global
batch with :func:`shard`; evaluation (and the trainer's validation) strides over the dataset
with :func:`shard_strided`; evaluation collects the per-sample results with
:func:`all_gather_objects`.
"""

from __future__ import annotations

import atexit
import os
from dataclasses import dataclass
from typing import TypeVar

import torch
import torch.distributed as dist

from crossview.device import resolve_device
from crossview.errors import UserError

T = TypeVar("T")


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


def dist_info_from_env() -> DistInfo:
    """This process's place as torchrun's environment variables describe it, without opening
    a process group (so that input can be checked on every rank before any collective)."""
    world_size = int(os.environ.get("WORLD_SIZE", "1"))
    if world_size <= 1:
        return DistInfo()
    if "RANK" not in os.environ:
        raise UserError(f"WORLD_SIZE is {world_size} but RANK is not set; launch with torchrun")
    return DistInfo(rank=int(os.environ["RANK"]), world_size=world_size,
                    local_rank=int(os.environ.get("LOCAL_RANK", "0")))


def init_distributed(device: str) -> DistInfo:
    """Open the process group described by torchrun's environment variables, if any.

    Returns the process's :class:`DistInfo`. On CUDA, the process uses ``cuda:LOCAL_RANK``.
    """
    info = dist_info_from_env()
    if not info.enabled:
        return info
    backend = "nccl" if resolve_device(device).type == "cuda" else "gloo"
    if backend == "nccl":
        torch.cuda.set_device(info.local_rank)
    if not dist.is_initialized():
        _import_dynamo_before_the_group()
        dist.init_process_group(backend=backend, rank=info.rank, world_size=info.world_size)
        # for the exit paths that skip close_distributed (an error raised between opening and
        # the caller's try/finally): still destroyed while the interpreter is intact
        atexit.unregister(_destroy_group)
        atexit.register(_destroy_group)
    return info


def _import_dynamo_before_the_group() -> None:
    """Import ``torch._dynamo`` while no process group exists.

    Its first import (DistributedDataParallel, ``torch.compile``, or the first call of a kernel
    registered with ``torch.library.custom_op``; crossview's MatchAttention op no longer is
    one) pulls in torch modules with ``dist.group.WORLD`` as a default argument
    (``ShardedGradScaler``, ``torch.distributed.nn.functional``). Imported while the group is
    open, those defaults keep it alive after ``destroy_process_group``: gloo's threads then run
    into interpreter teardown, where one releasing a finished work's tensors needs the GIL,
    Python ends it with ``pthread_exit`` and the unwinding through a C++ destructor aborts the
    process after its work is done ("terminate called without an active exception", SIGABRT).
    Imported first, the defaults are ``None``.
    """
    import torch._dynamo  # noqa: F401  (local: importing it, at this moment, is the point)


def close_distributed(info: DistInfo) -> None:
    """Tear down the process group opened by :func:`init_distributed`."""
    if info.enabled:
        _destroy_group()


def _destroy_group() -> None:
    if dist.is_initialized():
        dist.destroy_process_group()


def shard(items: list[int], info: DistInfo) -> list[int]:
    """This rank's contiguous share of a global batch (``len(items)`` divisible by world size)."""
    if len(items) % info.world_size:
        raise UserError(f"the global batch ({len(items)}) must be divisible by the number of "
                        f"processes ({info.world_size})")
    per_rank = len(items) // info.world_size
    return items[info.rank * per_rank:(info.rank + 1) * per_rank]


def shard_strided(count: int, info: DistInfo) -> range:
    """This rank's share of items ``0 .. count - 1``: ``rank, rank + world_size, ...``.

    The shares are disjoint and cover every item once for any ``count`` (when it is not
    divisible by the world size, the lower ranks get one item more).
    """
    return range(info.rank, count, info.world_size)


def all_gather_objects(value: T, info: DistInfo) -> list[T]:
    """Every rank's (picklable) ``value``, in rank order; ``[value]`` for one process.

    Every rank must call it, as for any collective.
    """
    if not info.enabled:
        return [value]
    gathered: list[T | None] = [None] * info.world_size
    dist.all_gather_object(gathered, value)
    return gathered  # type: ignore[return-value]


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
