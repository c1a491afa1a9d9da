"""The tables of README.md from who_answers.py's JSON: who answers per scene, and how far the
fused default and its network move when the weights change; a mean row per root.

Run: ``python docs/results/who-answers/table.py docs/results/who-answers/who_answers.json``
"""

from __future__ import annotations

import json
import sys
from collections.abc import Callable
from pathlib import Path

SOURCE_COLUMNS: list[tuple[str, Callable[[dict], float]]] = [
    ("bad-2", lambda r: r["bad2"]),
    ("SGBM %", lambda r: r["share_sgbm"]), ("SGBM wrong", lambda r: r["wrong_sgbm"]),
    ("network %", lambda r: r["share_network"]), ("network wrong", lambda r: r["wrong_network"]),
    ("fill %", lambda r: r["share_fill"]), ("fill wrong", lambda r: r["wrong_fill"]),
    ("median moved %", lambda r: r["share_median"]), ("its wrong", lambda r: r["wrong_median"]),
    ("strip moved %", lambda r: r["share_strip"]), ("its wrong", lambda r: r["wrong_strip"]),
    ("net alone wrong on SGBM's", lambda r: r["net_wrong_at_sgbm"]),
    ("net bad-2", lambda r: r["net_bad2"]),
]


def change_columns(key: str) -> list[tuple[str, Callable[[dict], float]]]:
    """The columns of one weight change (``perturb`` or ``adapt``)."""
    return [
        ("fused mean abs Δ px", lambda r: r[key]["fused"]["mean_abs"]),
        ("fused > 0.5 px %", lambda r: r[key]["fused"]["moved"]),
        ("fused bad-2 Δ", lambda r: r[key]["bad2"] - r["bad2"]),
        ("net mean abs Δ px", lambda r: r[key]["net"]["mean_abs"]),
        ("net > 0.5 px %", lambda r: r[key]["net"]["moved"]),
        ("net bad-2 Δ", lambda r: r[key]["net_bad2"] - r["net_bad2"]),
        ("labels changed %", lambda r: r[key]["labels_changed"]),
    ]


def table(records: list[dict], columns: list[tuple[str, Callable[[dict], float]]],
          digits: int = 2) -> str:
    """A markdown table: one row per record, a mean row per root."""
    lines = ["| scene | " + " | ".join(name for name, _ in columns) + " |",
             "|---|" + "---:|" * len(columns)]
    roots = dict.fromkeys(r["root"] for r in records)
    for root in roots:
        rows = [r for r in records if r["root"] == root]
        for r in rows:
            lines.append(f"| {r['scene']} | " + " | ".join(f"{get(r):.{digits}f}"
                                                        for _, get in columns) + " |")
        means = [sum(get(r) for r in rows) / len(rows) for _, get in columns]
        lines.append(f"| **mean {root} ({len(rows)})** | "
                     + " | ".join(f"**{m:.{digits}f}**" for m in means) + " |")
    return "\n".join(lines)


def main(path: Path) -> None:
    report = json.loads(path.read_text())
    records = report["records"]
    for r in records:  # the labels partition the known pixels and bad-2
        total = r["wrong_sgbm"] + r["wrong_network"] + r["wrong_fill"]
        assert abs(total - r["bad2"]) < 1e-9, (r["scene"], total, r["bad2"])
    print("## Who answers (% of known pixels; wrong: points of bad-2)\n")
    print(table(records, SOURCE_COLUMNS))
    print(f"\n## Weights times 1 + {report['sigma']} N(0, 1)\n")
    print(table(records, change_columns("perturb"), 3))
    adapted = [r for r in records if "adapt" in r]
    if adapted:
        print(f"\n## --adapt {report['adapt']}\n")
        print(table(adapted, change_columns("adapt"), 3))


if __name__ == "__main__":
    main(Path(sys.argv[1]))
