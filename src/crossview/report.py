"""Reports: a rich table on the console and a JSON file that says what machine measured it.

Speed is reported as measured in one run; compare rows of the same run (ratios), since a shared
machine is noisy between runs.
"""

from __future__ import annotations

import json
import os
import platform
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.markup import escape
from rich.measure import Measurement
from rich.table import Table

from crossview import console as consoles
from crossview.lazy import lazy_import
from crossview.output import staged_files

torch = lazy_import("torch")  # read only when a report records its environment

_UNLIMITED = 1 << 20  # characters: "as wide as the table needs"


def machine_info() -> dict[str, Any]:
    """What the numbers were measured on."""
    return {
        "platform": platform.platform(),
        "processor": platform.processor(),
        "cpu_count": os.cpu_count(),
        "torch": torch.__version__,
        "torch_threads": torch.get_num_threads(),
    }


def print_table(title: str, columns: Sequence[str], rows: Sequence[Sequence[Any]],
                console: Console | None = None, caption: str | None = None,
                width: int | None = None) -> None:
    """Print ``rows`` under ``columns`` as a rich table (``caption`` below it); floats get 4
    significant digits. Text is shown as written (``[...]`` is not rich markup here), and all
    of it: a cell too wide for its column folds onto more lines instead of being cut to an
    ellipsis. ``console``: default :data:`crossview.console.stdout`; ``width``: the table's
    width in characters (default: the terminal's; off a terminal, the width the table needs,
    so that nothing is cut or wrapped in a file or a pipe)."""
    table = Table(title=escape(title), caption=None if caption is None else escape(caption))
    for column in columns:
        table.add_column(escape(column), justify="right", overflow="fold")
    for row in rows:
        table.add_row(*(f"{cell:.4g}" if isinstance(cell, float) else escape(str(cell))
                        for cell in row))
    console = console or consoles.stdout
    if width is None and not console.is_terminal:
        # a console prints no wider than it is (80 columns off a terminal): one of the width
        # the table needs prints it whole, to the same file
        width = Measurement.get(console, console.options.update(max_width=_UNLIMITED),
                                table).maximum
        console = Console(file=console.file, width=width, highlight=False)
    console.print(table, width=width)


def report_json(payload: dict[str, Any]) -> str:
    """``payload`` plus :func:`machine_info`, as indented JSON text."""
    return json.dumps({"machine": machine_info(), **payload}, indent=2)


def write_json(path: str | Path, payload: dict[str, Any]) -> Path:
    """Write :func:`report_json` of ``payload`` to ``path`` (published by
    :func:`crossview.output.staged_files`: all or nothing); return the path."""
    with staged_files([path]) as (staged,):
        staged.write_text(report_json(payload))
    return Path(path)
