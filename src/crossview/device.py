"""Which device a computation runs on: one check, shared by every command and the api.

:func:`resolve_device` turns a user's device name into a ``torch.device`` that exists and
holds data on this machine, or raises one :class:`~crossview.errors.UserError` line naming the
setting and saying what to choose instead: an unknown name (``foo``), a backend this machine
lacks (``cuda`` without CUDA, ``mps`` without Apple's Metal), a CUDA index beyond the devices
present, or a device type crossview does not run on (``meta`` holds no data; ``xpu``, ...).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from crossview.errors import UserError
from crossview.lazy import lazy_import

if TYPE_CHECKING:
    import torch
else:  # the command line checks --device before it loads a model
    torch = lazy_import("torch")

SUPPORTED = ("cpu", "cuda", "mps")


def available_devices() -> list[str]:
    """The device names that work here, e.g. ``["cpu", "cuda", "cuda:0", "cuda:1"]``."""
    names = ["cpu"]
    if torch.cuda.is_available():
        names += ["cuda", *(f"cuda:{i}" for i in range(torch.cuda.device_count()))]
    if torch.backends.mps.is_available():
        names.append("mps")
    return names


def resolve_device(device: str | torch.device, setting: str = "device") -> torch.device:
    """``device`` as a ``torch.device`` that can run crossview's models here.

    Args:
        device: a name (``"cpu"``, ``"cuda"``, ``"cuda:1"``, ``"mps"``) or a ``torch.device``.
        setting: how the user gave it, for the message (``"--device"``, ``"config:
            train.device"``).

    Raises:
        UserError: one line naming ``setting`` and the value, and the devices that work here.
    """
    choose = f"available here: {', '.join(available_devices())}"
    if not isinstance(device, str | torch.device):
        raise UserError(f"{setting} must be a device name such as 'cpu', got {device!r}; "
                        f"{choose}")
    try:
        target = torch.device(device)
    except (RuntimeError, ValueError):
        raise UserError(f"{setting} {str(device)!r} is not a device name; {choose}") from None
    if target.type not in SUPPORTED:
        what = "holds no data" if target.type == "meta" else "is not supported by crossview"
        raise UserError(f"{setting} {str(device)!r}: device type {target.type!r} {what}; "
                        f"{choose}")
    if target.type == "cuda":
        if not torch.cuda.is_available():
            raise UserError(f"{setting} {str(device)!r}: CUDA is not available on this machine; "
                            f"{choose}")
        if target.index is not None and target.index >= torch.cuda.device_count():
            raise UserError(f"{setting} {str(device)!r}: this machine has "
                            f"{torch.cuda.device_count()} CUDA device(s); {choose}")
    if target.type == "mps" and not torch.backends.mps.is_available():
        raise UserError(f"{setting} {str(device)!r}: MPS (Apple Metal) is not available on this "
                        f"machine; {choose}")
    return target
