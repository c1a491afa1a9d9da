"""Fixtures shared by every test directory (this file also puts tests/ on ``sys.path``)."""

from __future__ import annotations

import pytest

from ranks import free_port as _free_port


@pytest.fixture
def free_port() -> int:
    """A TCP port on 127.0.0.1 that nothing listens on (for a torch.distributed store)."""
    return _free_port()
