"""Fixtures shared by the MatchAttention tests."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from crossview.attention import set_backend
from crossview.attention.match.choose import ENV_VAR


@pytest.fixture
def forget_default(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """No process-wide backend choice (``set_backend``, ``$CROSSVIEW_MATCH_BACKEND``) during the
    test, none left behind."""
    monkeypatch.delenv(ENV_VAR, raising=False)
    set_backend(None)
    yield
    set_backend(None)
