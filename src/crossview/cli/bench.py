"""``crossview bench ...``: speed and memory benchmarks that print a table and write JSON.

Each benchmark lives in :mod:`crossview.bench` (one module per subject); this module only
parses options and calls it.
"""

from __future__ import annotations

import typer

app = typer.Typer(help="Speed and memory benchmarks (tables + JSON).", no_args_is_help=True)
