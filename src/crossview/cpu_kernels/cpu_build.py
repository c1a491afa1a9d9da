"""Build (on first use) and load crossview's C++ CPU kernels: the fused MatchAttention of the
``cpu`` backend and the colour-weighted median of the fusions.

The sources in ``csrc/`` (:data:`FILES`) are compiled with ``torch.utils.cpp_extension.load``
(ninja) into one module in the torch extensions cache (``$TORCH_EXTENSIONS_DIR`` or
``~/.cache/torch_extensions/pyXY_cpu``), in a directory named ``crossview_cpu_kernels_KEY``:
the key hashes the sources, compiler, flags, torch, Python and CPU (see
:mod:`crossview.cpu_kernels.build_key`), so builds for several checkouts, environments or CPUs
live side by side, and a ``-march=native`` binary is never loaded on another CPU model. The
kernels are built on Linux only. A failed build is remembered for
the process; the reason is what :func:`crossview.attention.match.choose_backend` reports. A build
lock left by a killed compile is removed after a while instead of blocking every later process
(see :mod:`crossview.cpu_kernels.build_lock`). A compile (no built library in the build directory
yet) is announced with :data:`COMPILE_NOTE` and a spinner (:mod:`crossview.long_step`).
``$CROSSVIEW_CPU_MARCH`` builds for another target than this CPU (``x86-64-v3``: what an
AVX2-only CPU gets from ``-march=native``), to measure that build here.
"""

from __future__ import annotations

import contextlib
import functools
import os
import platform
import re
import shutil
import subprocess
import threading
from collections.abc import Mapping
from pathlib import Path
from types import ModuleType

from crossview.cpu_kernels.build_key import build_key
from crossview.cpu_kernels.build_lock import wait_for_build_lock
from crossview.lazy import lazy_import
from crossview.long_step import long_step

# loaded at the first build only: it pulls in setuptools (0.1 s on every import)
cpp_extension = lazy_import("torch.utils.cpp_extension")

CSRC = Path(__file__).resolve().parent / "csrc"
# every file of the build, headers included (the key hashes them all), and those compiled
FILES = ("match_attention.h", "match_attention.cpp", "weighted_median.h", "weighted_median.cpp",
         "module.cpp")
SOURCES = tuple(name for name in FILES if name.endswith(".cpp"))
# tuples: torch's load appends its own flags to the lists it is given, which would change the key
CFLAGS = ("-O3", "-march=native", "-fopenmp", "-fno-math-errno")
LDFLAGS = ("-fopenmp",)
# the target of the build, instead of -march=native (e.g. x86-64-v3: any AVX2 CPU; x86-64-v2:
# SSE4.2 only), to build what another CPU would run (the key hashes the flags)
MARCH_ENV = "CROSSVIEW_CPU_MARCH"
NAME = "crossview_cpu_kernels"
BUILD_PROBLEM = "the C++ extension cannot be built"  # how every reason of this file starts
COMPILE_NOTE = ("compiling the C++ kernels (MatchAttention, the weighted median), once for this "
                "machine (a minute or two)")


def _compiler() -> str:
    """The C++ compiler torch's build runs: ``$CXX``, else ``c++``."""
    return os.environ.get("CXX", "c++")


def cflags() -> tuple[str, ...]:
    """:data:`CFLAGS`, with ``-march=native`` replaced by ``-march=$CROSSVIEW_CPU_MARCH`` when
    that is set (:data:`MARCH_ENV`).

    Raises:
        ValueError: the variable holds anything but a target name.
    """
    march = os.environ.get(MARCH_ENV, "").strip()
    if not march:
        return tuple(CFLAGS)
    if not re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9_.+-]*", march):
        raise ValueError(f"{MARCH_ENV}={march!r} is not a -march target name")
    return tuple(f"-march={march}" if flag == "-march=native" else flag for flag in CFLAGS)


def read_files() -> dict[str, bytes]:
    """The contents of every file of :data:`FILES`, by name."""
    return {name: (CSRC / name).read_bytes() for name in FILES}


def build_name(files: Mapping[str, bytes] | None = None) -> str:
    """The extension's name, which is also its build directory's: ``crossview_cpu_kernels_``
    followed by the key of :func:`crossview.cpu_kernels.build_key.build_key` for ``files``
    (:func:`read_files`, read now if not given) and :func:`cflags`."""
    files = read_files() if files is None else files
    together = b"".join(name.encode() + b"\0" + files[name] + b"\0" for name in sorted(files))
    return f"{NAME}_{build_key(together, cflags(), LDFLAGS, _compiler())}"


def _place_files(build_dir: Path, files: Mapping[str, bytes]) -> list[Path]:
    """Write each of ``files`` into ``build_dir`` (named after their key) unless it is there
    already: the build then reads the same paths whichever checkout runs it, so torch's
    ``build.ninja`` stays the same and ninja has nothing to redo. Returns the paths of the
    :data:`SOURCES` to compile."""
    for name, contents in files.items():
        copy = build_dir / name
        if not copy.exists():
            staged = build_dir / f".{name}.{os.getpid()}"
            staged.write_bytes(contents)
            # link, unlike replace, keeps a copy placed meanwhile by a concurrent first run: a
            # new modification time would make ninja compile again
            with contextlib.suppress(FileExistsError):
                os.link(staged, copy)
            staged.unlink()
    return [build_dir / name for name in SOURCES]


@functools.cache
def _build() -> ModuleType | str:
    """The loaded extension module, or the reason it cannot be built."""
    if (system := platform.system()) != "Linux":
        return f"{BUILD_PROBLEM}: the fused kernels are built on Linux only, not {system}"
    cxx = _compiler()
    if shutil.which(cxx) is None:
        return f"{BUILD_PROBLEM}: no C++ compiler ({cxx!r} not found)"
    if shutil.which("ninja") is None:
        return f"{BUILD_PROBLEM}: ninja is not installed"
    files = read_files()  # read once: the key and the compiled copies must agree
    try:
        flags = cflags()
    except ValueError as error:
        return f"{BUILD_PROBLEM}: {error}"
    try:
        name = build_name(files)
    except (OSError, subprocess.SubprocessError) as error:
        return f"{BUILD_PROBLEM}: the C++ compiler {cxx!r} does not run ({error})"
    try:
        # torch's own choice, created
        build_dir = Path(cpp_extension._get_build_directory(name, verbose=False))
        wait_for_build_lock(build_dir)
        # a first run compiles for a minute or more: say so (a built one loads in a second)
        announce = (contextlib.nullcontext() if (build_dir / f"{name}.so").is_file()
                    else long_step(COMPILE_NOTE))
        with announce:
            return cpp_extension.load(name=name,
                                      sources=[str(path) for path in
                                               _place_files(build_dir, files)],
                                      build_directory=str(build_dir), extra_cflags=list(flags),
                                      extra_ldflags=list(LDFLAGS), verbose=False)
    except Exception as error:  # a compiler or linker failure, reported rather than raised
        detail = str(error).strip().splitlines()
        return f"{BUILD_PROBLEM}: {detail[-1] if detail else type(error).__name__}"


# one build at a time in this process: the fusions ask from two threads at once
_BUILD_LOCK = threading.Lock()


def _built() -> ModuleType | str:
    """:func:`_build`, one thread at a time."""
    with _BUILD_LOCK:
        return _build()


def unavailable_reason() -> str | None:
    """Why the C++ kernels cannot run here (building them if needed), or ``None``."""
    built = _built()
    return built if isinstance(built, str) else None


def extension() -> ModuleType:
    """The compiled kernels: ``forward(q, k, v, rel_pos, r, l1, scale, need_attn)``,
    ``backward(grad_out, grad_attn, q, k, v, rel_pos, r, l1, scale)`` (MatchAttention) and
    ``weighted_median(values, image, pixels, radius, step, weight_of)``."""
    built = _built()
    if isinstance(built, str):
        raise RuntimeError(built)
    return built
