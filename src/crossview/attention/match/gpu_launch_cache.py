"""What Triton compiles for a launch of a kernel, and whether it must: the source, backend and
options ``JITFunction.run`` builds (:func:`launch_source`), the key two launches share one
compiled kernel by (:func:`specialization`), whether Triton's cache on disk holds it
(:func:`cached`) and whether a launch in this process will compile (:func:`needs_compile`, for
the backend's one-time note). Its own module so that the kernels
(:mod:`crossview.attention.match.gpu_kernels`) and the compile check
(:mod:`crossview.attention.match.gpu_compile`) both import it without a cycle; it relies on
Triton's launch internals (tested with Triton 3.6 and 3.9).
"""

from __future__ import annotations

import hashlib
import re
from typing import Any

import triton
from triton._C.libtriton import get_cache_invalidating_env_vars
from triton.backends.compiler import GPUTarget
from triton.compiler import ASTSource, make_backend
from triton.runtime.cache import get_cache_key, get_cache_manager
from triton.runtime.jit import create_function_from_signature

# knobs JITFunction.run adds to a launch's options, where this Triton has them
# (fpsan_homomorphic_casts: in 3.9, not in 3.6)
LAUNCH_KNOBS = ("instrumentation_mode", "fpsan_homomorphic_casts")


def target(arch: str) -> GPUTarget:
    """The Triton target of ``"sm_90"`` (``sm_`` and the compute capability's digits)."""
    found = re.fullmatch(r"sm_(\d{2,3})", arch)
    if found is None:
        raise ValueError(f"target must look like sm_90 or sm_80, got {arch!r}")
    return GPUTarget("cuda", int(found.group(1)), 32)


def launch_source(kernel: Any, args: tuple, kwargs: dict, gpu: GPUTarget) -> tuple[Any, Any, Any]:
    """Triton's ``(ASTSource, backend, options)`` for launching ``kernel(*args, **kwargs)`` on
    ``gpu``, as ``JITFunction.run`` builds them before it compiles."""
    kwargs = dict(kwargs)
    kwargs["debug"] = kwargs.get("debug", kernel.debug) or triton.knobs.runtime.debug
    for knob in LAUNCH_KNOBS:  # the compilation knobs this Triton passes to a launch
        if hasattr(triton.knobs.compilation, knob):
            kwargs[knob] = getattr(triton.knobs.compilation, knob)
    backend = make_backend(gpu)
    binder = create_function_from_signature(kernel.signature, kernel.params, backend)
    bound, specialization, _ = binder(*args, **kwargs)
    options, signature, constexprs, attrs = kernel._pack_args(backend, kwargs, bound,
                                                              specialization, None)
    return ASTSource(kernel, signature, constexprs, attrs), backend, options


def specialization(kernel: Any, args: tuple, kwargs: dict, arch: str = "sm_90") -> str:
    """What Triton keys a compiled kernel on for this launch (its source hash aside): two
    launches with equal strings share one compiled kernel."""
    src, _, options = launch_source(kernel, args, kwargs, target(arch))
    return f"{src.signature}{src.constants}{src.attrs}{options.hash()}"


def cached(kernel: Any, args: tuple, kwargs: dict, gpu: GPUTarget) -> bool:
    """Whether Triton's cache on disk holds the launch's compiled kernel (``triton.compile``'s
    own lookup)."""
    src, backend, options = launch_source(kernel, args, kwargs, gpu)
    key = get_cache_key(src, backend, options, get_cache_invalidating_env_vars())
    manager = get_cache_manager(hashlib.sha256(key.encode("utf-8")).hexdigest())
    return manager.get_group(f"{src.name[:150]}.json") is not None


_seen: set[tuple] = set()


def needs_compile(kernel: Any, args: tuple, kwargs: dict) -> bool:
    """Whether launching ``kernel(*args, **kwargs)`` on the current GPU will compile: true once
    per variant not yet seen in this process and not in Triton's cache on disk. False when it
    cannot tell (Triton's internals changed): a note is not worth failing a launch for."""
    try:
        variant = (kernel.fn.__name__, str(sorted(kwargs.items())),
                   tuple(str(getattr(arg, "dtype", type(arg))) for arg in args),
                   tuple(arg for arg, param in zip(args, kernel.params, strict=False)
                         if isinstance(arg, int) and not param.do_not_specialize))
        if variant in _seen:
            return False
        _seen.add(variant)
        return not cached(kernel, args, kwargs, triton.runtime.driver.active.get_current_target())
    except Exception:
        return False
