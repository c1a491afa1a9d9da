"""Tests of crossview.attention.match_backend: the process-wide default and choose_backend."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
import torch

from crossview.attention import choose_backend, match_attention, set_backend
from crossview.attention.match_backend import ENV_VAR, get_backend


@pytest.fixture(autouse=True)
def _forget_default(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    monkeypatch.delenv(ENV_VAR, raising=False)
    set_backend(None)
    yield
    set_backend(None)


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

