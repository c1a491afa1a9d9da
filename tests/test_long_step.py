"""``long_step``: its note at once, or only once the step has run ``after`` seconds (a quick step
says nothing), and the count a bar step is told."""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable

from crossview.long_step import long_step


def test_the_note_comes_at_once_by_default(log_lines: Callable[[], str]) -> None:
    with long_step("compiling", total=2) as advance:
        assert log_lines() == "note: compiling\n"
        advance(2)


def test_a_late_note_only_for_a_step_still_running(log_lines: Callable[[], str]) -> None:
    with long_step("scanning quickly", after=60.0):
        pass
    assert log_lines() == ""
    noted = threading.Event()

    class Seen(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            noted.set()

    # On the root logger, after pytest's capturing handler: the timer thread has handed the
    # record to the capture by the time the step is told its note has come.
    handler = Seen()
    logging.getLogger().addHandler(handler)
    try:
        with long_step("scanning slowly", after=0.01):
            assert noted.wait(30)  # the step runs until its note has come
    finally:
        logging.getLogger().removeHandler(handler)
    assert log_lines() == "note: scanning slowly\n"
