"""The triton backend as the chooser and the custom ops see it (crossview.attention.match.gpu):
CUDA tensors go to it when Triton imports, CPU tensors only when it is named under Triton's
interpreter, a clear reason when Triton is missing, its kernels registered for CUDA."""

from __future__ import annotations

import re
import subprocess
import sys
import warnings

import pytest
import torch

from crossview.attention import choose_backend, match_attention, set_backend
from crossview.attention.match import gpu
from crossview.attention.match.choose import backend_for

needs_triton = pytest.mark.skipif(gpu.IMPORT_FAILURE is not None, reason=f"{gpu.IMPORT_FAILURE}")


pytestmark = pytest.mark.usefixtures("forget_default")


@needs_triton
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.float16, torch.float64])
def test_cuda_tensors_go_to_triton(dtype: torch.dtype) -> None:
    assert choose_backend("cuda", dtype) == choose_backend("cuda", dtype, backend="triton")
    assert choose_backend("cuda", dtype).name == "triton"


@needs_triton
@pytest.mark.parametrize("op", ["match_attention", "match_attention_backward"])
def test_the_kernels_are_the_cuda_kernels_of_the_custom_ops(op: str) -> None:
    assert torch._C._dispatch_has_kernel_for_dispatch_key(f"crossview::{op}", "CUDA")


@pytest.mark.skipif(gpu.INTERPRETED, reason="Triton's interpreter is on")
def test_without_the_interpreter_cpu_tensors_cannot_run_on_triton() -> None:
    reason = ("tensors are on cpu, the Triton kernels run on cuda (on cpu only under Triton's "
              "interpreter, TRITON_INTERPRET=1, for tests)")
    if gpu.IMPORT_FAILURE is None:  # else Triton's absence is the reason on cpu too
        assert choose_backend("cpu").skipped["triton"] == reason
    with pytest.raises(RuntimeError, match="backend 'triton' cannot run: "):
        choose_backend("cpu", backend="triton")


@pytest.mark.triton
@pytest.mark.skipif(not gpu.INTERPRETED, reason="needs TRITON_INTERPRET=1")
def test_under_the_interpreter_cpu_tensors_run_on_triton_only_when_named() -> None:
    auto = choose_backend("cpu")
    assert auto.name != "triton"
    assert "only when asked for by name (backend='triton')" in auto.skipped["triton"]
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # passing over it is no fallback: nothing is broken
        assert backend_for(torch.device("cpu"), torch.float32).name == auto.name
    set_backend("triton")
    assert choose_backend("cpu").name == "triton"
    q = torch.randn(1, 4, 4, 1, 2)
    out = match_attention(q, q, q, torch.zeros(1, 4, 4, 1, 2), 1)
    torch.testing.assert_close(out, match_attention(q, q, q, torch.zeros(1, 4, 4, 1, 2), 1,
                                                    backend="reference"))


def test_other_devices_are_not_for_triton() -> None:
    assert choose_backend("meta").skipped["triton"] == (
        "tensors are on meta, the Triton kernels run on cuda (on cpu only under Triton's "
        "interpreter, TRITON_INTERPRET=1, for tests)")


_WITHOUT_TRITON = """
import warnings, sys, torch
sys.modules["triton"] = None  # import triton raises ImportError, as when it is not installed
from crossview.attention import choose_backend
from crossview.attention.match.choose import backend_for
print(choose_backend("cuda").name)
print(choose_backend("cuda").skipped["triton"])
with warnings.catch_warnings(record=True) as caught:
    warnings.simplefilter("always")
    backend_for(torch.device("cuda"), torch.float32)
    backend_for(torch.device("cuda"), torch.float32)
print(len(caught), caught[0].category.__name__, caught[0].message)
try:
    choose_backend("cuda", backend="triton")
except RuntimeError as error:
    print(error)
"""


def test_without_triton_cuda_tensors_fall_back_to_the_reference_with_one_warning() -> None:
    done = subprocess.run([sys.executable, "-c", _WITHOUT_TRITON], capture_output=True,
                          text=True, check=True)
    name, reason, warning, error = done.stdout.strip().splitlines()
    assert name == "reference"
    assert re.fullmatch(r"Triton cannot be imported \(.*\); install it with "
                        r"pip install 'crossview\[gpu\]'", reason)
    assert warning == f"1 RuntimeWarning MatchAttention falls back to the slow reference " \
                      f"backend: {reason}"
    assert error == f"MatchAttention backend 'triton' cannot run: {reason}"
