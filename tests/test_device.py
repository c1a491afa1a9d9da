"""``crossview.device.resolve_device``: the one check of a device name, for every command."""

from __future__ import annotations

import pytest
import torch

from crossview.device import available_devices, resolve_device
from crossview.errors import UserError

NO_CUDA = pytest.mark.skipif(torch.cuda.is_available(), reason="this machine has CUDA")
NO_MPS = pytest.mark.skipif(torch.backends.mps.is_available(), reason="this machine has MPS")


@pytest.mark.parametrize(("device", "expected"), [("cpu", "cpu"), ("cpu:0", "cpu:0"),
                                                  (torch.device("cpu"), "cpu")])
def test_working_devices_resolve(device: str | torch.device, expected: str) -> None:
    assert resolve_device(device) == torch.device(expected)


@pytest.mark.parametrize(("device", "message"), [
    ("foo", "--device 'foo' is not a device name; available here: cpu"),
    ("CPU", "--device 'CPU' is not a device name"),
    ("", "--device '' is not a device name"),
    ("meta", "--device 'meta': device type 'meta' holds no data; available here: cpu"),
    ("xpu", "--device 'xpu': device type 'xpu' is not supported by crossview"),
    (None, "--device must be a device name such as 'cpu', got None"),
    (0, "--device must be a device name such as 'cpu', got 0"),
    pytest.param("cuda", "--device 'cuda': CUDA is not available on this machine",
                 marks=NO_CUDA),
    pytest.param("cuda:1", "--device 'cuda:1': CUDA is not available", marks=NO_CUDA),
    pytest.param("mps", "--device 'mps': MPS (Apple Metal) is not available on this machine",
                 marks=NO_MPS),
])
def test_bad_devices_are_one_line_naming_the_setting(device: object, message: str) -> None:
    with pytest.raises(UserError) as raised:
        resolve_device(device, "--device")
    assert str(raised.value).startswith(message) and "\n" not in str(raised.value)


def test_available_devices_start_with_cpu() -> None:
    assert available_devices()[0] == "cpu"
