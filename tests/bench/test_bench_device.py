"""``crossview.bench.device``: the fused backend per ``--device``, GPU-synchronised timing and
peak memory (the GPU side runs only on a machine with a CUDA GPU)."""

from __future__ import annotations

import pytest
import torch

from crossview.bench import device
from crossview.cpu_kernels import cpu_build
from crossview.errors import UserError


@pytest.mark.skipif(cpu_build.unavailable_reason() is not None,
                    reason=f"{cpu_build.unavailable_reason()}")
def test_cpu_runs_the_fused_cpu_backend() -> None:
    assert device.fused_backend("cpu") == "cpu"


@pytest.mark.parametrize(("name", "message"), [
    ("tpu", "--device must be one of cpu, cuda, got 'tpu'"),
    pytest.param("cuda", "--device cuda: torch sees no CUDA GPU", marks=pytest.mark.skipif(
        torch.cuda.is_available(), reason="a CUDA GPU is visible")),
])
def test_devices_that_cannot_run_raise_a_user_error(name: str, message: str) -> None:
    with pytest.raises(UserError, match=message):
        device.fused_backend(name)


def test_on_cpu_nothing_waits_and_peak_memory_is_aten_s() -> None:
    def work() -> None:
        torch.empty(2**20, dtype=torch.uint8).fill_(1)

    assert device.synchronized(work, "cpu") is work
    assert device.peak_bytes(work, "cpu") == 2**20


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
def test_on_a_gpu_the_peak_is_the_allocation_and_the_fused_backend_triton() -> None:
    assert device.fused_backend("cuda") == "triton"
    assert device.peak_bytes(lambda: torch.empty(2**20, dtype=torch.uint8, device="cuda")
                             .fill_(1), "cuda") == 2**20
