"""How a handler answers in the page: a :class:`~crossview.errors.UserError` (a bad upload, a
wrong number) becomes a ``gr.Error`` that carries its message, shown in the page as one
notice, never a stack trace; the warnings crossview logs while the handler runs (logger
``crossview``: a swapped pair, a model on random weights) become ``gr.Warning`` notices. Any
other exception is a fault of crossview: its traceback goes to the terminal that runs the demo
(logger ``crossview.demo``) and the page says that it failed and where to look.
"""

from __future__ import annotations

import functools
import logging
import threading
from collections.abc import Callable
from contextlib import AbstractContextManager
from typing import Any, TypeVar

import gradio as gr

from crossview.errors import UserError
from crossview.library_log import library_log_to

log = logging.getLogger(__name__)
Handler = TypeVar("Handler", bound=Callable[..., Any])


class _PageWarnings(logging.Handler):
    """Shows the ``crossview`` log's warnings of one thread (one request) as ``gr.Warning``."""

    def __init__(self) -> None:
        super().__init__(logging.WARNING)
        self.thread = threading.get_ident()

    def filter(self, record: logging.LogRecord) -> bool:
        return record.thread == self.thread and not record.name.startswith(__name__)

    def emit(self, record: logging.LogRecord) -> None:
        gr.Warning(record.getMessage())


def warnings_in_page() -> AbstractContextManager[None]:
    """Within: a warning on the ``crossview`` log from this thread is shown in the page."""
    return library_log_to(_PageWarnings())


def in_page(handler: Handler) -> Handler:
    """``handler`` (a Gradio event function) answering in the page: see the module docstring.
    The signature is kept (``functools.wraps``), so Gradio still finds its ``gr.Progress``."""

    @functools.wraps(handler)
    def answering(*args: Any, **kwargs: Any) -> Any:
        try:
            with warnings_in_page():
                return handler(*args, **kwargs)
        except gr.Error:
            raise
        except UserError as error:
            raise gr.Error(str(error), print_exception=False) from None
        except Exception as error:
            log.exception("%s failed", handler.__name__)
            raise gr.Error(f"crossview failed ({type(error).__name__}: {error}); the terminal "
                           "running `crossview demo` shows the traceback",
                           print_exception=False) from None

    return answering  # type: ignore[return-value]
