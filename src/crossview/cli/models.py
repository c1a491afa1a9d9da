"""``crossview models``: every registered model with its task, size, default weights (bundled,
or published and whether they are in the cache), their licence where known, and the command
it is the default of (the model that command runs without --model)."""

from __future__ import annotations

from crossview.defaults import DEFAULT_MODELS
from crossview.lazy import lazy_import
from crossview.report import print_table

api = lazy_import("crossview.api")


def models_command() -> None:
    """List the models that --model takes: task, parameters, default weights, licence and the
    command each is the default of."""
    default_of = {name: command for command, name in DEFAULT_MODELS.items()}
    rows = []
    for info in map(api.model_info, api.list_models()):
        licence = info.licence or ("-" if info.weights == "none" else "unknown")
        rows.append((info.name, info.task, f"{info.parameters / 1e6:.2f} M", info.weights,
                     licence, default_of.get(info.name, "")))
    print_table("models (--model NAME; crossview.load_model(NAME))",
                ["model", "task", "parameters", "weights", "licence", "default of"], rows,
                caption="published: fetch with `crossview weights download NAME`; default of "
                        "C: `crossview C` runs it without --model")
