"""``crossview models``: every registered model with its task, size, default weights (bundled,
or published and whether they are in the cache) and their licence where known."""

from __future__ import annotations

from crossview.lazy import lazy_import
from crossview.report import print_table

api = lazy_import("crossview.api")


def models_command() -> None:
    """List the models that --model takes: task, parameters, default weights and licence."""
    rows = []
    for info in map(api.model_info, api.list_models()):
        licence = info.licence or ("-" if info.weights == "none" else "unknown")
        rows.append((info.name, info.task, f"{info.parameters / 1e6:.2f} M", info.weights,
                     licence))
    print_table("models (--model NAME; crossview.load_model(NAME))",
                ["model", "task", "parameters", "weights", "licence"], rows,
                caption="published: fetch with `crossview weights download NAME`")
