"""Subprocess tests bound their waits with the one shared hang guard, never a number of their own:
under a loaded machine a short fixed limit fails tests in which nothing is wrong."""

from __future__ import annotations

import re
from pathlib import Path

TESTS = Path(__file__).parent
LITERAL_TIMEOUT = re.compile(r"timeout\s*=\s*[\d.]+", re.IGNORECASE)


def test_no_test_waits_with_a_literal_timeout() -> None:
    """A ``timeout = NUMBER`` anywhere under tests/ (a call's argument or a module's constant)
    is a second limit beside :data:`hang_guard.HANG_GUARD_SECONDS`."""
    found = [f"{path.relative_to(TESTS)}:{number}: {line.strip()}"
             for path in sorted(TESTS.rglob("*.py"))
             for number, line in enumerate(path.read_text().splitlines(), start=1)
             if LITERAL_TIMEOUT.search(line)]
    assert found == [], "use hang_guard.HANG_GUARD_SECONDS:\n" + "\n".join(found)
