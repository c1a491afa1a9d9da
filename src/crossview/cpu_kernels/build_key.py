"""The key that names one build of a torch C++ extension, so that different builds live side by
side in the torch extensions cache instead of replacing each other.

``torch.utils.cpp_extension.load`` keeps one build per name and recompiles it whenever its
``build.ninja`` changes. Under one fixed name, two checkouts (another source path or contents) or
two virtual environments (another torch) sharing the cache recompile in turn at every switch.
Named after a hash of everything the binary depends on, each combination gets its own directory:

- the source contents (not its path: the source is compiled from a copy kept in the build
  directory, so checkouts with the same source share one build);
- the compiler command and what its ``--version`` prints, the compile and link flags;
- torch's version and install directory (its headers and libraries) and Python's ABI (extension
  suffix, include directory);
- this CPU's model and feature flags (``/proc/cpuinfo``): a ``-march=native`` binary may use
  instructions another CPU lacks (illegal instruction), so it is never loaded on another CPU model.
"""

from __future__ import annotations

import hashlib
import json
import platform
import subprocess
import sysconfig
from collections.abc import Sequence
from pathlib import Path

import torch

CPUINFO = Path("/proc/cpuinfo")
KEY_LENGTH = 16  # hex digits: 64 bits, no collision among the few builds a cache holds


def cpu_fingerprint() -> str:
    """A short hash of this CPU's model and feature flags (:data:`CPUINFO`)."""
    description = platform.machine() + platform.processor()
    if CPUINFO.exists():
        lines = CPUINFO.read_text(errors="replace").splitlines()
        wanted = ("model name", "flags", "Features", "CPU part")
        description += "".join(sorted({line for line in lines if line.startswith(wanted)}))
    return hashlib.sha256(description.encode()).hexdigest()[:12]


def compiler_identity(compiler: str) -> str:
    """What ``compiler --version`` prints (name, version, build).

    Raises:
        OSError, subprocess.SubprocessError: the compiler does not run or fails.
    """
    return subprocess.run([compiler, "--version"], capture_output=True, text=True, check=True,
                          timeout=60).stdout.strip()


def build_key(source: bytes, cflags: Sequence[str], ldflags: Sequence[str], compiler: str) -> str:
    """A hex digest of everything a build of ``source`` with these flags depends on (see the
    module docstring); it runs ``compiler --version`` (errors as :func:`compiler_identity`)."""
    inputs = {
        "source": hashlib.sha256(source).hexdigest(),
        "compiler": [compiler, compiler_identity(compiler)],
        "cflags": list(cflags),
        "ldflags": list(ldflags),
        "torch": [torch.__version__, str(Path(torch.__file__).parent)],
        # the include directory torch's build.ninja uses (posix_prefix: as torch asks for it)
        "python": [sysconfig.get_config_var("EXT_SUFFIX"),
                   sysconfig.get_path("include", scheme="posix_prefix")],
        "cpu": cpu_fingerprint(),
    }
    return hashlib.sha256(json.dumps(inputs, sort_keys=True).encode()).hexdigest()[:KEY_LENGTH]
