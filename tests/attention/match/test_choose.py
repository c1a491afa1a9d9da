"""Tests of crossview.attention.match.choose: the process-wide default, choose_backend and the
reasons it gives."""

from __future__ import annotations

import re
import warnings

import pytest
import torch

from crossview.attention import choose_backend, match_attention, set_backend
from crossview.attention.match.choose import ENV_VAR, backend_for, get_backend, unavailable_reason

pytestmark = pytest.mark.usefixtures("forget_default")


def test_default_is_auto_and_set_backend_overrides_env(monkeypatch: pytest.MonkeyPatch) -> None:
    assert get_backend() == "auto"
    monkeypatch.setenv(ENV_VAR, "reference")
    assert get_backend() == "reference"
    assert choose_backend("cpu").name == "reference"
    set_backend("auto")
    assert get_backend() == "auto"
    set_backend(None)
    assert get_backend() == "reference"


def test_unknown_names_raise(monkeypatch: pytest.MonkeyPatch) -> None:
    with pytest.raises(ValueError, match="unknown MatchAttention backend 'cuda'"):
        set_backend("cuda")
    monkeypatch.setenv(ENV_VAR, "fast")
    with pytest.raises(ValueError, match=f"from \\${ENV_VAR}"):
        get_backend()
    q = torch.zeros(1, 4, 4, 1, 2)
    with pytest.raises(ValueError, match="unknown MatchAttention backend"):
        match_attention(q, q, q, torch.zeros(1, 4, 4, 1, 2), 1)



@pytest.mark.parametrize(("device", "dtype", "reason"), [
    ("meta", torch.float32, "tensors are on meta, the fused kernels run on cpu only"),
    ("cpu", torch.float16, "dtype torch.float16 is not float32, float64 or bfloat16"),
])
def test_tensors_the_cpu_backend_does_not_suit_go_to_the_reference_silently(
        device: str, dtype: torch.dtype, reason: str) -> None:
    assert unavailable_reason("cpu", device, dtype) == reason
    choice = choose_backend(device, dtype)
    assert set(choice.skipped) == {"triton", "cpu"} and choice.skipped["cpu"] == reason
    with pytest.raises(RuntimeError, match=re.escape(f"backend 'cpu' cannot run: {reason}")):
        choose_backend(device, dtype, backend="cpu")
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no fallback warning: nothing is broken here
        assert backend_for(torch.device(device), dtype).name == "reference"
