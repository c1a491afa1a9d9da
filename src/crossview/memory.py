"""How much memory a run may use, and refusing a run that would need more, before it starts.

A run that cannot fit fails late and badly: the allocator raises after minutes of work, or the
kernel's out-of-memory killer ends the process (and others). Callers that can estimate what a
run needs (:func:`crossview.api.check_memory`) compare it with :func:`available_memory` and
refuse with one line that says what to change; :func:`check_memory` is that one guard, for
every size that comes from a file header (``.npy``), an option (``--size``) or a configuration
(``train.batch_size``), before anything of that size is allocated (:func:`array_bytes` sizes
an array exactly, however absurd its shape).

The memory available is ``$CROSSVIEW_MAX_MEMORY_GB`` (GiB) when set (a limit of the user's
choosing; tests use it to be independent of the machine), else for CUDA devices the free device
memory, else the least of what the machine, the process's control group and its address-space
limit leave: the kernel's ``MemAvailable`` (``/proc/meminfo``: what can be allocated without
swapping), a container's memory limit less its usage (cgroup v2 or v1), and ``ulimit -v`` less
the process's virtual size; else the free physical pages (``os.sysconf``); ``None`` where none
of these can be read, and nothing is refused then.
"""

from __future__ import annotations

import math
import os
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from crossview.errors import UserError, shown

if TYPE_CHECKING:
    import torch

ENV_VAR = "CROSSVIEW_MAX_MEMORY_GB"
GIB = 2**30


def memory_limit() -> int | None:
    """The bytes ``$CROSSVIEW_MAX_MEMORY_GB`` allows (``None``: not set); a :class:`UserError`
    if it is not a positive number. A command that checks many items calls it up front, so
    that a bad value is one error, not one per item."""
    limit = os.environ.get(ENV_VAR)
    if not limit:
        return None
    try:
        gib = float(limit)
    except ValueError:
        gib = math.nan
    if not math.isfinite(gib) or gib <= 0:
        raise UserError(f"${ENV_VAR} must be a positive number of GiB, got {shown(limit)}")
    return int(gib * GIB)


def available_memory(device: torch.device | str = "cpu") -> tuple[int, str] | None:
    """``(bytes, where the figure comes from)`` a run on ``device`` may use, or ``None``."""
    limit = memory_limit()
    if limit is not None:
        return limit, f"${ENV_VAR}"
    if str(device).startswith("cuda"):
        import torch  # only a GPU's figure needs it: crossview.data.io reads images without it

        device = torch.device(device)
        free, _ = torch.cuda.mem_get_info(device)
        return free, f"free on {device}"
    figures = [figure for figure in (_mem_available(), _cgroup_room(), _address_space_room())
               if figure is not None]
    if figures:
        return min(figures)
    try:
        return os.sysconf("SC_AVPHYS_PAGES") * os.sysconf("SC_PAGE_SIZE"), "free memory"
    except (ValueError, OSError, AttributeError):
        return None


def _read(path: str) -> str | None:
    try:
        return Path(path).read_text()
    except (OSError, UnicodeDecodeError):
        return None


def _mem_available() -> tuple[int, str] | None:
    """The kernel's ``MemAvailable`` (``/proc/meminfo``), in bytes."""
    for line in (_read("/proc/meminfo") or "").splitlines():
        if line.startswith("MemAvailable:"):
            return int(line.split()[1]) * 1024, "MemAvailable"
    return None


def _cgroup_room() -> tuple[int, str] | None:
    """What this process's control group (a container's memory limit) still allows: cgroup v2
    ``memory.max - memory.current``, or v1 ``memory.limit_in_bytes - memory.usage_in_bytes``;
    ``None`` without a limit."""
    for limit_file, usage_file in (("memory.max", "memory.current"),
                                   ("memory/memory.limit_in_bytes",
                                    "memory/memory.usage_in_bytes")):
        limit, usage = (_read(f"/sys/fs/cgroup/{name}") for name in (limit_file, usage_file))
        if limit is None or usage is None or not limit.strip().isdigit():
            continue  # "max": no limit
        if int(limit) >= 2**60:  # v1 writes "no limit" as a huge number
            continue
        return max(0, int(limit) - int(usage)), "the control group's memory limit"
    return None


def _address_space_room() -> tuple[int, str] | None:
    """What ``ulimit -v`` (``RLIMIT_AS``) still allows beyond this process's virtual size;
    ``None`` without that limit."""
    try:
        import resource
    except ImportError:  # not on Windows
        return None
    soft, _ = resource.getrlimit(resource.RLIMIT_AS)
    if soft == resource.RLIM_INFINITY:
        return None
    for line in (_read("/proc/self/status") or "").splitlines():
        if line.startswith("VmSize:"):
            return max(0, soft - int(line.split()[1]) * 1024), "ulimit -v"
    return None


def format_bytes(count: float) -> str:
    """``27.3 GiB``, ``512 MiB``: binary units, three significant figures."""
    for unit, size in (("TiB", 2**40), ("GiB", GIB), ("MiB", 2**20)):
        if count >= size:
            return f"{count / size:.3g} {unit}"
    return f"{count / 2**10:.3g} KiB"


def array_bytes(shape: Sequence[int], itemsize: int = 4) -> int:
    """The bytes of an array of ``shape`` with ``itemsize`` bytes per element (float32: 4),
    in Python integers: exact for any shape a header or an option may claim."""
    return math.prod(int(n) for n in shape) * itemsize


def check_memory(needed: int, what: str, advice: str,
                 device: torch.device | str = "cpu") -> None:
    """:class:`UserError` ``"{what} needs about N GiB of memory (estimate), more than the M GiB
    available (source); {advice}"`` if ``needed`` bytes exceed :func:`available_memory`."""
    available = available_memory(device)
    if available is None or needed <= available[0]:
        return
    raise UserError(f"{what} needs about {format_bytes(needed)} of memory (estimate), more than "
                    f"the {format_bytes(available[0])} available ({available[1]}); {advice}")
