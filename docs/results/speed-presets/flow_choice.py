"""Choose the flow presets from the records of ``flow_presets.py`` (EPE per pair and setting)
and ``flow_timing.py`` (time per pair and setting), by leave-one-group-out on real-train.

``best`` is the setting with the lowest mean EPE over the real-train pairs; ``balanced`` the
one with the lowest mean EPE among those whose time at ``--size`` is at most ``--balanced``
times best's, ``fast`` the same within ``--fast`` times best's (the fastest setting when none
fits). For each real-train group the three are chosen on the other groups' pairs and scored on
the group's own; the mean of these left-out scores (per pair) is what each budget's choice is
worth on pairs it did not see. The choice on all groups is what ships; the development pairs
are reported for it, with OpenCV DIS (medium) on the same pairs.

Only settings scored on every pair of the study files and timed at ``--size`` compete (a study
run cut short and continued in a second file, or with a larger grid, merges).

Run: ``python docs/results/speed-presets/flow_choice.py TIMING.json STUDY.json [STUDY.json
...] [--size 375x1242] [--json OUT.json]``
"""

from __future__ import annotations

import argparse
import json
import sys
from collections import defaultdict
from pathlib import Path

import numpy as np

from crossview.models.dense.classical import dis_flow
from crossview.report import print_table, write_json

sys.path.insert(0, str(Path(__file__).parents[1] / "real-flow"))
from flow_on_real_pairs import choose, epe, real_pairs  # real_choice's choice by mean

PRESETS = ("fast", "balanced", "best")
DIS = "DIS medium"


def presets(table: dict[str, dict[str, float]], pairs: list[str], seconds: dict[str, float],
            budgets: dict[str, float]) -> dict[str, str]:
    """``{preset: setting}`` chosen on ``pairs``: best by mean EPE, the others by mean EPE
    within their budget (a fraction of best's ``seconds``)."""
    best = choose(table, pairs)
    chosen = {"best": best}
    for preset, fraction in budgets.items():
        within = {s: v for s, v in table.items() if seconds[s] <= fraction * seconds[best]}
        chosen[preset] = (choose(within, pairs) if within
                          else min(table, key=lambda s: seconds[s]))
    return chosen


def dis_scores(roots: list[str], names: set[str]) -> dict[str, float]:
    """``{pair: EPE}`` of OpenCV DIS (medium) on the named pairs of ``roots``."""
    return {name: epe(dis_flow(a, b), gt) for root in roots
            for name, a, b, gt in real_pairs(root) if name in names}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("timing", type=Path)
    parser.add_argument("study", type=Path, nargs="+")
    parser.add_argument("--size", default="375x1242", help="the size the budgets are at")
    parser.add_argument("--balanced", type=float, default=0.5)
    parser.add_argument("--fast", type=float, default=0.25)
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()
    records = [r for path in args.study for r in json.loads(path.read_text())["records"]]
    timing = json.loads(args.timing.read_text())["rows"]
    seconds = defaultdict(dict)
    for row in timing:
        seconds[row["size"]][row["setting"]] = row["median_s"]
    sizes = list(seconds)
    train = [r for r in records if r["group"] != r["pair"]]  # real-train: grouped pairs
    dev = [r for r in records if r["group"] == r["pair"]]
    table: dict[str, dict[str, float]] = defaultdict(dict)
    dev_table: dict[str, dict[str, float]] = defaultdict(dict)
    for r in train:
        table[r["setting"]][r["pair"]] = r["epe"]
    for r in dev:
        dev_table[r["setting"]][r["pair"]] = r["epe"]
    group_of = {r["pair"]: r["group"] for r in train}
    pairs = sorted(group_of)
    dev_pairs = sorted({r["pair"] for r in dev})
    table = {s: v for s, v in table.items() if s in seconds[args.size] and len(v) == len(pairs)
             and len(dev_table[s]) == len(dev_pairs)}
    budgets = {"balanced": args.balanced, "fast": args.fast}
    at = seconds[args.size]
    left_out: dict[str, dict[str, float]] = defaultdict(dict)
    folds = {}
    for group in sorted(set(group_of.values())):
        others = [p for p in pairs if group_of[p] != group]
        folds[group] = presets(table, others, at, budgets)
        for preset, setting in folds[group].items():
            left_out[preset].update({p: table[setting][p] for p in pairs if group_of[p] == group})
    chosen = presets(table, pairs, at, budgets)
    dis = dis_scores(sorted({r["root"] for r in records}), set(pairs) | set(dev_pairs))

    def mean(values: dict[str, float], keys: list[str]) -> float:
        return float(np.mean([values[k] for k in keys])) if keys else float("nan")

    def timed(setting: str) -> list[str]:  # seconds (x DIS) at each size
        return [f"{seconds[size][setting]:.3f} ({seconds[size][setting] / seconds[size][DIS]:.0f}x)"
                for size in sizes]

    rows = []
    for setting in sorted(table, key=lambda s: at[s]):
        rows.append([setting, f"{mean(table[setting], pairs):.3f}",
                     f"{mean(dev_table[setting], dev_pairs):.3f}",
                     *timed(setting),
                     " ".join(p for p in PRESETS if chosen[p] == setting)])
    rows.append([DIS, f"{mean(dis, pairs):.3f}", f"{mean(dis, dev_pairs):.3f}",
                 *timed(DIS), ""])
    print_table(f"flow settings: mean EPE px (real-train {len(pairs)}, development "
                f"{len(dev_pairs)}), time per pair s (x DIS)",
                ["setting", "real-train", "dev", *sizes, "preset"], rows)
    print_table("presets: chosen on all real-train groups; left-out = leave-one-group-out",
                ["preset", "setting", "real-train", "left-out", "dev", *sizes],
                [[p, chosen[p], f"{mean(table[chosen[p]], pairs):.3f}",
                  f"{mean(left_out[p], pairs):.3f}", f"{mean(dev_table[chosen[p]], dev_pairs):.3f}",
                  *timed(chosen[p])] for p in PRESETS])
    print_table("development pairs: EPE px", ["pair", *PRESETS, DIS],
                [[p, *(f"{dev_table[chosen[q]][p]:.3f}" for q in PRESETS), f"{dis[p]:.3f}"]
                 for p in dev_pairs])
    for group, choice in folds.items():
        print(f"group {group}: " + ", ".join(f"{p} {choice[p]}" for p in PRESETS))
    if args.json:
        write_json(args.json, {
            "size": args.size, "budgets": budgets, "chosen": chosen, "folds": folds,
            "left_out_mean": {p: mean(left_out[p], pairs) for p in PRESETS},
            "real_train_mean": {s: mean(table[s], pairs) for s in table} | {DIS: mean(dis, pairs)},
            "dev": {s: dev_table[s] for s in table} | {DIS: {p: dis[p] for p in dev_pairs}},
            "seconds": seconds,
            # curve.py's flow panel: the presets and DIS at --size
            "points": {p: {"seconds": at[chosen[p]], "dev_epe": mean(dev_table[chosen[p]],
                                                                     dev_pairs)}
                       for p in PRESETS} | {"DIS": {"seconds": at[DIS],
                                                    "dev_epe": mean(dis, dev_pairs)}}})


if __name__ == "__main__":
    main()
