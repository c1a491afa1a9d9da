"""The command shows the library's log on stderr, one line per record, as it printed them."""

from __future__ import annotations

import logging
from collections.abc import Iterator

import pytest

from crossview.cli import log_handler


@pytest.fixture
def installed() -> Iterator[None]:
    logger = log_handler.LOGGER
    handlers, level = list(logger.handlers), logger.level
    log_handler.install()
    log_handler.install()  # a second call (every main() does it) adds nothing
    yield
    logger.handlers[:] = handlers
    logger.setLevel(level)


@pytest.mark.usefixtures("installed")
def test_records_become_one_prefixed_line_each(capsys: pytest.CaptureFixture[str]) -> None:
    logger = logging.getLogger("crossview.some.module")
    logger.debug("not shown")
    logger.info("waiting for %s", "a build")
    logger.warning("removed %s", "/tmp/x")
    logger.error("gave up")
    assert capsys.readouterr().err == "note: waiting for a build\nwarning: removed /tmp/x\n" \
                                      "error: gave up\n"
    assert sum(isinstance(h, log_handler.ConsoleHandler)
               for h in log_handler.LOGGER.handlers) == 1


def test_the_library_alone_prints_nothing(capsys: pytest.CaptureFixture[str]) -> None:
    logger = log_handler.LOGGER
    handlers = list(logger.handlers)
    logger.handlers[:] = [h for h in handlers if not isinstance(h, log_handler.ConsoleHandler)]
    try:
        logging.getLogger("crossview.output").warning("removed something")
    finally:
        logger.handlers[:] = handlers
    assert capsys.readouterr().err == ""  # the NullHandler keeps logging's last resort quiet
