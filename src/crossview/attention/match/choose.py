"""Which MatchAttention backend runs: the backends in order of preference, a process-wide
default, and the reasons a backend is skipped.

Backends, in order of preference for ``"auto"`` (:data:`BACKENDS`):

- ``triton``: fused Triton kernels (:mod:`crossview.attention.match.gpu`), CUDA tensors, when
  Triton is installed (``pip install 'crossview[gpu]'``);
- ``cpu``: fused C++ kernels (:mod:`crossview.attention.match.cpu`), CPU tensors only,
  compiled on first use;
- ``reference``: plain PyTorch (:mod:`crossview.attention.match.reference`), any device;
- ``export``: plain PyTorch in ONNX-exportable operators
  (:mod:`crossview.attention.match.export`), any device; never reached by ``"auto"`` (the
  reference is always available), named by :mod:`crossview.export` while tracing.

The default is ``"auto"``; :func:`set_backend` or the environment variable
``CROSSVIEW_MATCH_BACKEND`` change it for the whole process, so a whole model can be run and
benchmarked per backend without touching its code.
"""

from __future__ import annotations

import contextlib
import os
import warnings
from collections.abc import Iterator
from dataclasses import dataclass, field

import torch

from crossview.attention.match import cpu, export, gpu, reference
from crossview.attention.match.backend import Backend
from crossview.registry import Registry

# name -> backend, registered in the order of preference for "auto"
BACKENDS: Registry[str, Backend] = Registry("MatchAttention backend")
for _backend in (gpu.BACKEND, cpu.BACKEND, reference.BACKEND, export.BACKEND):
    BACKENDS.register(_backend.name, _backend)
ENV_VAR = "CROSSVIEW_MATCH_BACKEND"

_default: str | None = None
_warned: set[str] = set()


@dataclass(frozen=True)
class BackendChoice:
    """The backend that runs (``name``) and why each preferred one was skipped."""

    name: str
    skipped: dict[str, str] = field(default_factory=dict)


def _check_name(name: str, where: str) -> str:
    names = ("auto", *(backend.name for backend in BACKENDS.values()))
    if name not in names:
        raise ValueError(f"unknown MatchAttention backend {name!r} from {where}; "
                         f"choose one of {names}")
    return name


def set_backend(name: str | None) -> None:
    """Set the process-wide default backend (``"auto"``, ``"triton"``, ``"cpu"``,
    ``"reference"``).

    ``None`` forgets the setting, so the environment variable (or ``"auto"``) applies again.

    Example:
        >>> from crossview.attention import set_backend
        >>> set_backend("reference")
        >>> set_backend(None)
    """
    global _default
    _default = None if name is None else _check_name(name, "set_backend")


def get_backend() -> str:
    """The process-wide default: :func:`set_backend`, else ``$CROSSVIEW_MATCH_BACKEND``, else
    ``"auto"``."""
    if _default is not None:
        return _default
    env = os.environ.get(ENV_VAR)
    return _check_name(env, f"${ENV_VAR}") if env else "auto"


def unavailable_reason(name: str, device: torch.device | str = "cpu",
                       dtype: torch.dtype = torch.float32) -> str | None:
    """Why backend ``name`` cannot run tensors of this device and dtype, or ``None`` if it can.

    Asking about ``cpu`` compiles the C++ extension the first time (cached afterwards).
    """
    _check_name(name, "unavailable_reason")
    return BACKENDS.get(name).unavailable_reason(torch.device(device), dtype)


def choose_backend(device: torch.device | str = "cpu", dtype: torch.dtype = torch.float32,
                   backend: str = "auto") -> BackendChoice:
    """Pick the backend for tensors on ``device`` with ``dtype``.

    ``backend="auto"`` follows the process-wide default (:func:`get_backend`); if that is also
    ``"auto"`` the first available backend of :data:`BACKENDS` wins and the others' reasons are
    reported in ``skipped`` (including a backend that runs only when named, see
    :attr:`Backend.explicit_only`). A backend named explicitly must be available, else
    ``RuntimeError``.

    Example:
        >>> from crossview.attention import choose_backend
        >>> choose_backend("meta").name
        'reference'
    """
    requested = _check_name(backend, "backend=") if backend != "auto" else get_backend()
    if requested != "auto":
        reason = unavailable_reason(requested, device, dtype)
        if reason is not None:
            raise RuntimeError(f"MatchAttention backend {requested!r} cannot run: {reason}")
        return BackendChoice(requested)
    skipped: dict[str, str] = {}
    for candidate in BACKENDS.values():
        reason = unavailable_reason(candidate.name, device, dtype) or \
            candidate.explicit_only(torch.device(device))
        if reason is None:
            return BackendChoice(candidate.name, skipped)
        skipped[candidate.name] = reason
    raise AssertionError("the reference backend is always available")


def backend_for(device: torch.device, dtype: torch.dtype, backend: str = "auto") -> Backend:
    """The backend :func:`choose_backend` picks, warning once per process for each preferred
    backend that was skipped although these tensors suit it (it cannot be built or is not
    installed here), since the fallback is much slower."""
    choice = choose_backend(device, dtype, backend)
    chosen = BACKENDS.get(choice.name)
    for name, reason in choice.skipped.items():
        skipped = BACKENDS.get(name)
        suits = skipped.explicit_only(device) is None and skipped.unsupported(device, dtype) is None
        if name not in _warned and suits:
            _warned.add(name)
            warnings.warn(f"MatchAttention falls back to the {chosen.label} backend: {reason}",
                          RuntimeWarning, stacklevel=3)
    return chosen


@contextlib.contextmanager
def using_backend(name: str) -> Iterator[None]:
    """:func:`set_backend` ``(name)`` for the duration of the block, then the previous setting
    again (e.g. the ``export`` backend while a model is traced for ONNX)."""
    global _default
    previous = _default
    set_backend(name)
    try:
        yield
    finally:
        _default = previous
