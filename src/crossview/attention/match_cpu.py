"""Build (on first use) and load the fused C++ MatchAttention kernels.

The sources in ``csrc/`` are compiled with ``torch.utils.cpp_extension.load`` (ninja) into the
torch extensions cache (``$TORCH_EXTENSIONS_DIR`` or ``~/.cache/torch_extensions``). The build
uses ``-march=native``, so its name carries a fingerprint of this CPU: a cached binary is never
loaded on another CPU model. A failed build is remembered for the process; the reason is what
:func:`crossview.attention.choose_backend` reports. A build lock left by a killed compile is
removed after a while instead of blocking every later process (see
:mod:`crossview.attention.build_lock`).
"""

from __future__ import annotations

import functools
import hashlib
import os
import platform
import shutil
from pathlib import Path
from types import ModuleType

from crossview.attention.build_lock import wait_for_build_lock
from crossview.attention.match_backend import BUILD_PROBLEM

SOURCE = Path(__file__).resolve().parent / "csrc" / "match_attention.cpp"
CFLAGS = ["-O3", "-march=native", "-fopenmp", "-fno-math-errno"]


def cpu_fingerprint() -> str:
    """A short hash of this CPU's model and feature flags (``/proc/cpuinfo``)."""
    description = platform.machine() + platform.processor()
    cpuinfo = Path("/proc/cpuinfo")
    if cpuinfo.exists():
        lines = cpuinfo.read_text(errors="replace").splitlines()
        wanted = ("model name", "flags", "Features", "CPU part")
        description += "".join(sorted({line for line in lines if line.startswith(wanted)}))
    return hashlib.sha256(description.encode()).hexdigest()[:12]


@functools.cache
def _build() -> ModuleType | str:
    """The loaded extension module, or the reason it cannot be built."""
    compiler = os.environ.get("CXX", "c++")
    if shutil.which(compiler) is None:
        return f"{BUILD_PROBLEM}: no C++ compiler ({compiler!r} is not on PATH)"
    if shutil.which("ninja") is None:
        return f"{BUILD_PROBLEM}: ninja is not installed"
    from torch.utils.cpp_extension import _get_build_directory, load

    name = f"crossview_match_attention_{cpu_fingerprint()}"
    try:
        build_dir = _get_build_directory(name, verbose=False)  # torch's own choice, created
        wait_for_build_lock(build_dir)
        return load(name=name, sources=[str(SOURCE)], build_directory=build_dir,
                    extra_cflags=CFLAGS, extra_ldflags=["-fopenmp"], verbose=False)
    except Exception as error:  # a compiler or linker failure, reported rather than raised
        detail = str(error).strip().splitlines()
        return f"{BUILD_PROBLEM}: {detail[-1] if detail else type(error).__name__}"


def unavailable_reason() -> str | None:
    """Why the fused kernels cannot run here (building them if needed), or ``None``."""
    built = _build()
    return built if isinstance(built, str) else None


def extension() -> ModuleType:
    """The compiled kernels: ``forward(q, k, v, rel_pos, r, l1, scale, need_attn)`` and
    ``backward(grad_out, grad_attn, q, k, v, rel_pos, r, l1, scale)``."""
    built = _build()
    if isinstance(built, str):
        raise RuntimeError(built)
    return built
