"""The stereo presets chosen: per time budget, the most accurate setting of
``speed_settings.py`` among those that fit it, by leave-one-group-out on real-train scenes.

Reads the settings' records on real-train (``speed_settings.py``) and their times
(``speed_timing.py``); a preset's budget is a time per pair at one size (:data:`BUDGETS`):
``best`` within the 2 s the default has at 375x1242, ``balanced`` within half of ``best``'s
time there (the rule of the flow presets, ``flow_choice.py``), ``fast`` within 0.2 s at
480x640 (the issue's 5 pairs a second); a setting fits when its median time there is within
the budget, and where none fits the fastest setting is taken. Within the fitting settings, each
group of scenes gets the setting with the lowest mean bad-2 over the *other* groups (its
left-out score); the setting chosen on all groups is the preset. With ``--dev`` the
development scenes' records are reported beside (never used to choose).

Run: ``python docs/results/speed-presets/speed_choice.py SETTINGS_TRAIN.json TIMING.json
../shared/real-train [--add RECORDS_TRAIN.json TIMING.json] [--dev SETTINGS_DEV.json ...]
[--json OUT]`` (``--add``: more settings, as ``working_size.py`` records and times them).
"""

from __future__ import annotations

import argparse
import json
import sys
from collections import defaultdict
from pathlib import Path

import numpy as np

from crossview.report import print_table, write_json

sys.path.insert(0, str(Path(__file__).parents[1] / "real-stereo"))
from real_choice import choose, scene_groups  # leave-one-group-out's groups and choice

# preset -> (size of the budget's pair, seconds per pair there; None: half of best's time)
BUDGETS = {"best": ("375x1242", 2.0), "balanced": ("375x1242", None), "fast": ("480x640", 0.2)}


def bad2_table(path: Path) -> dict[str, dict[str, float]]:
    """``{setting: {scene: bad-2 %}}`` of a ``speed_settings.py`` record file."""
    table: dict[str, dict[str, float]] = defaultdict(dict)
    for record in json.loads(path.read_text())["records"]:
        table[record["setting"]][record["scene"]] = record["bad2"]
    return table


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("settings", type=Path)
    parser.add_argument("timing", type=Path)
    parser.add_argument("root", type=Path)
    parser.add_argument("--add", nargs=2, type=Path, action="append", default=[],
                        metavar=("RECORDS", "TIMING"),
                        help="the real-train records and times of more settings "
                        "(working_size.py)")
    parser.add_argument("--dev", type=Path, action="append", default=[])
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()
    table, dev, seconds = {}, {}, {}
    for records, timing in [(args.settings, args.timing), *args.add]:
        table |= bad2_table(records)
        seconds |= {(row["size"], row["setting"]): row["median_s"]
                    for row in json.loads(timing.read_text())["rows"]}
    for records in args.dev:
        dev |= bad2_table(records)
    scenes = sorted(next(iter(table.values())))
    groups = scene_groups(args.root)
    group_of = {scene: groups.get(scene, scene) for scene in scenes}
    chosen: dict[str, dict] = {}
    for preset, (size, budget) in BUDGETS.items():
        if budget is None:
            budget = seconds[(size, chosen["best"]["setting"])] / 2
        fitting = {s: t for s, t in table.items() if seconds.get((size, s), np.inf) <= budget}
        if not fitting:  # the fastest setting, alone
            fastest = min((s for s in table if (size, s) in seconds),
                          key=lambda s: seconds[(size, s)])
            fitting = {fastest: table[fastest]}
        left_out = {}
        for group in sorted(set(group_of.values())):
            others = [s for s in scenes if group_of[s] != group]
            pick = choose(fitting, others)
            left_out.update({s: fitting[pick][s] for s in scenes if group_of[s] == group})
        final = choose(fitting, scenes)
        chosen[preset] = {
            "budget": f"{budget:.3f} s at {size}", "fits": len(fitting) > 1 or seconds[
                (size, final)] <= budget, "setting": final,
            "seconds": {s: seconds.get((s, final)) for s in ("375x1242", "480x640")},
            "left_out_bad2": float(np.mean(list(left_out.values()))),
            "real_train_bad2": float(np.mean([fitting[final][s] for s in scenes])),
            "dev_bad2": float(np.mean(list(dev[final].values()))) if final in dev else None,
            "dev_per_scene": dev.get(final)}
    print_table("stereo presets: the most accurate setting within each budget (leave-one-group-"
                "out over real-train; dev reported only)",
                ["preset", "budget", "setting", "s at 375x1242", "s at 480x640",
                 "left-out bad-2", "real-train bad-2", "dev bad-2"],
                [[p, c["budget"], c["setting"] + ("" if c["fits"] else " (none fits: fastest)"),
                  *(f"{c['seconds'][s]:.3f}" if c.get("seconds", {}).get(s) else "-"
                    for s in ("375x1242", "480x640")),
                  *(f"{c[k]:.2f}" if c.get(k) is not None else "-"
                    for k in ("left_out_bad2", "real_train_bad2", "dev_bad2"))]
                 for p, c in chosen.items()])
    means = sorted((float(np.mean(list(t.values()))), s) for s, t in table.items())
    print_table("every setting: mean bad-2 % (real-train; dev) and time per pair",
                ["setting", "real-train", "dev", "s at 375x1242", "s at 480x640"],
                [[s, f"{m:.2f}",
                  f"{np.mean(list(dev[s].values())):.2f}" if s in dev else "-",
                  *(f"{seconds[(z, s)]:.3f}" if (z, s) in seconds else "-"
                    for z in ("375x1242", "480x640"))] for m, s in means])
    if args.json:
        write_json(args.json, {"budgets": BUDGETS, "chosen": chosen,
                               "mean_bad2": {s: m for m, s in means}})


if __name__ == "__main__":
    main()
