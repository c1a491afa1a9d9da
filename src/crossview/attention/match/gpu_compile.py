"""What the Triton kernels of :mod:`.gpu_kernels` compile to, without a GPU.

A kernel *variant* is everything Triton compiles a kernel for: the kernel, dtype, radius,
channels of q/k and of v, similarity (shapes are not specialised, see :mod:`.gpu_kernels`).
:func:`compile_variant` compiles one for a GPU architecture (``"sm_90"``) on the CPU, with
Triton's own specialisation of the launch the backend makes (the same signature, constexprs,
alignment attributes and options), and reads the compile time, PTX size, registers and spill
bytes (from ``ptxas -v``). :func:`needs_compile` tells whether a launch would compile, before
it does (neither in memory nor in Triton's cache on disk): the backend logs one note then.

Everything here needs the compiled (not interpreted) kernels: under ``TRITON_INTERPRET=1``
``@triton.jit`` builds interpreted ones, so run it in a process without that variable
(``crossview bench kernels`` does). It uses Triton's launch internals
(``create_function_from_signature``, ``JITFunction._pack_args``), tested with Triton 3.6 and 3.9.
"""

from __future__ import annotations

import contextlib
import io
import re
import resource
import time
from dataclasses import asdict, dataclass
from typing import Any

import torch
import triton

from crossview.attention.match import gpu_kernels
from crossview.attention.match.gpu_launch_cache import cached, launch_source, target

KERNELS = ("forward", "backward_rows", "backward_keys")
DTYPE_NAMES = {"float32": torch.float32, "float16": torch.float16, "bfloat16": torch.bfloat16,
               "float64": torch.float64}
SHORT = {"float32": "fp32", "float16": "fp16", "bfloat16": "bf16", "float64": "fp64"}


@dataclass(frozen=True, order=True)
class Variant:
    """One compiled kernel: ``kernel`` (one of :data:`KERNELS`), ``dtype`` (a key of
    :data:`DTYPE_NAMES`), ``channels`` of q and k, ``cv`` of v, ``radius`` (``None`` for the
    backward's key kernel, which has no window) and ``l1`` (the similarity: L1 or dot)."""

    kernel: str
    dtype: str
    channels: int
    cv: int
    radius: int | None
    l1: bool = True

    @property
    def name(self) -> str:
        """``"forward r2 c40 fp32"`` (``" dot"`` appended for the dot-product similarity)."""
        window = "" if self.radius is None else f" r{self.radius}"
        channels = f"c{self.channels}" + ("" if self.cv == self.channels else f"/{self.cv}")
        return (f"{self.kernel.replace('_', ' ')}{window} {channels} {SHORT[self.dtype]}"
                + ("" if self.l1 else " dot"))

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


def _mock(shape: tuple[int, ...], dtype: torch.dtype) -> triton.runtime.jit.MockTensor:
    return triton.runtime.jit.MockTensor(dtype, list(shape))


def launch(variant: Variant) -> tuple[Any, tuple, dict]:
    """``(kernel, args, kwargs)`` of the backend's launch of ``variant``, on Triton's
    ``MockTensor`` placeholders (a small map: the kernels do not specialise on shapes)."""
    dtype = DTYPE_NAMES[variant.dtype]
    acc = gpu_kernels.accumulator(dtype)[0]
    c, cv, heads = variant.channels, variant.cv, 2
    radius = 0 if variant.radius is None else variant.radius
    side = 2 * radius + 2
    q = _mock((1, side, side, heads, c), dtype)
    k = _mock((1, side, side, heads, c), dtype)
    v = _mock((1, side, side, heads, cv), dtype)
    rel_pos = _mock((1, side, side, 1, 2), dtype)
    params = _mock((3,), acc)
    out = _mock(v.shape, dtype)
    pairs = _mock((side ** 4 * heads,), acc)
    if variant.kernel == "forward":
        _, args, kwargs = gpu_kernels.forward_launch(q, k, v, rel_pos, params, out, None, radius,
                                                     variant.l1)
        return gpu_kernels._forward_kernel, args, kwargs
    if variant.kernel == "backward_rows":
        _, args, kwargs = gpu_kernels.backward_rows_launch(
            q, k, v, rel_pos, params, out, None, q, pairs, pairs,
            _mock(pairs.shape, torch.int32), _mock((1, side, side, heads, 2), acc), radius,
            variant.l1)
        return gpu_kernels._backward_rows_kernel, args, kwargs
    if variant.kernel == "backward_keys":
        _, args, kwargs = gpu_kernels.backward_keys_launch(
            q, k, out, pairs, pairs, _mock(pairs.shape, torch.int64),
            _mock((side * side * heads + 1,), torch.int64), k, v, side * side, variant.l1)
        return gpu_kernels._backward_keys_kernel, args, kwargs
    raise ValueError(f"unknown kernel {variant.kernel!r}; expected one of {KERNELS}")


_REGISTERS = re.compile(r"Used (\d+) registers")
_SPILLS = re.compile(r"(\d+) bytes spill stores, (\d+) bytes spill loads")
_STACK = re.compile(r"(\d+) bytes stack frame")


def _cpu_seconds() -> float:
    """CPU seconds of this process and its finished children (ptxas runs as one)."""
    own, children = resource.getrusage(resource.RUSAGE_SELF), \
        resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + children.ru_utime + children.ru_stime


def compile_variant(variant: Variant, arch: str = "sm_90") -> dict[str, Any]:
    """Compile ``variant`` for ``arch`` (``"sm_90"``) on the CPU. Returns ``{"variant",
    "target", "compile_s", "cpu_s", "ptx_lines", "registers", "spills", "spill_stores",
    "spill_loads", "stack_bytes", "hash", "cache_hit", "cached"}``:

    - ``compile_s``: seconds of ``triton.compile`` (Triton's frontend, LLVM, ``ptxas``);
      ``cpu_s``: the CPU seconds of this process and ``ptxas`` meanwhile (what a busy machine
      does not inflate);
    - ``ptx_lines``, and from ``ptxas -v`` the registers per thread and the spilled bytes
      (``spills`` = stores + loads) and stack frame;
    - ``hash``: Triton's hash of the compiled kernel (variants that Triton specialises alike
      share one); ``cache_hit``: it came from Triton's cache (``ptxas`` did not run, so the
      ``ptxas`` figures are ``None``; point ``TRITON_CACHE_DIR`` at an empty folder);
    - ``cached``: Triton's cache holds it afterwards, as :func:`needs_compile` expects.
    """
    gpu = target(arch)
    kernel, args, kwargs = launch(variant)
    src, _, options = launch_source(kernel, args, kwargs, gpu)
    log = io.StringIO()
    with triton.knobs.nvidia.scope(), contextlib.redirect_stdout(log):
        triton.knobs.nvidia.dump_ptxas_log = True  # Triton prints ptxas -v to stdout
        start, cpu = time.perf_counter(), _cpu_seconds()
        compiled = triton.compile(src, target=gpu, options=options.__dict__)
        seconds, cpu = time.perf_counter() - start, _cpu_seconds() - cpu
    text = log.getvalue()
    registers = _REGISTERS.search(text)
    spills = [int(n) for n in _SPILLS.findall(text)[-1]] if _SPILLS.search(text) else None
    stack = _STACK.search(text)
    return {"variant": variant.name, "target": arch, "compile_s": seconds, "cpu_s": cpu,
            "ptx_lines": compiled.asm["ptx"].count("\n"),
            "registers": int(registers.group(1)) if registers else None,
            "spills": None if spills is None else sum(spills),
            "spill_stores": None if spills is None else spills[0],
            "spill_loads": None if spills is None else spills[1],
            "stack_bytes": int(stack.group(1)) if stack else None,
            "hash": compiled.hash, "cache_hit": registers is None,
            "cached": cached(kernel, args, kwargs, gpu)}
