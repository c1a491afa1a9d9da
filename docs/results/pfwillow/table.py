"""The PF-WILLOW tables of README.md (markdown) from `crossview eval --json` files.

    python docs/results/pfwillow/table.py docs/results/pfwillow/transformatcher-lite0-lite2.json

One row per category and method (the model, then the baselines the file holds), PCK per pair
averaged over the category's pairs, as `crossview eval` prints it.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path


def markdown(path: Path) -> str:
    result = json.loads(path.read_text())
    metrics = result["metrics"]
    runs = [(result["model"], result), *((run["name"], run) for run in result["baselines"])]
    lines = ["| category | method | " + " | ".join(metrics) + " |",
             "|---|---|" + "---|" * len(metrics)]
    for category in [*result["categories"], None]:
        for name, run in runs:
            means = (run["mean"] if category is None else
                     {m: run["categories"][category][m]["image_mean"] for m in metrics})
            cells = " | ".join(f"{means[m]:.1f}" for m in metrics)
            label = category or f"**mean ({result['samples']} pairs)**"
            lines.append(f"| {label} | {name} | {cells} |")
    return "\n".join(lines)


if __name__ == "__main__":
    for arg in sys.argv[1:]:
        print(f"{arg}:\n\n{markdown(Path(arg))}\n")
