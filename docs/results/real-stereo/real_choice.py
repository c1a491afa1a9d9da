"""Choose an inference setting by leave-one-group-out, and report the left-out numbers.

Reads the records of ``real_inference_settings.py`` (one per scene, setting and refinement)
for the scenes of one ROOT; a scene's group is the ``group`` column of ROOT's README table
(``../shared/real-train``: scenes that share a capture or an object set), or the scene itself
when the README has no such column. For each group, the setting with the lowest mean bad-2 over
the *other* groups' scenes is chosen and scored on the group's own scenes; the mean of these
left-out scores (per scene) is what the choice is worth on scenes it did not see. The setting
chosen on all groups is the one to ship. ``--scenes`` limits the pool (e.g. the scenes held out
of training), ``--settings`` the candidates (e.g. those within a time budget).

Run: ``python docs/results/real-stereo/real_choice.py SETTINGS.json ROOT [--scenes a,b,...]
[--settings "a,b,..."] [--json OUT]``
"""

from __future__ import annotations

import argparse
import json
import re
from collections import defaultdict
from pathlib import Path

import numpy as np

from crossview.report import print_table, write_json

ROW = re.compile(r"^\|\s*`([^`]+)`\s*\|\s*([A-Za-z0-9_-]+)\s*\|")


def scene_groups(root: Path) -> dict[str, str]:
    """``{scene: group}`` from the README table of ``root`` (empty if it has none)."""
    readme = root / "README.md"
    if not readme.is_file():
        return {}
    lines = readme.read_text().splitlines()
    header = next((line for line in lines if line.startswith("| scene") and "group" in line), "")
    if not header:
        return {}
    return {match[1]: match[2] for line in lines if (match := ROW.match(line))}


def choose(table: dict[str, dict[str, float]], scenes: list[str]) -> str:
    """The setting with the lowest mean bad-2 over ``scenes``."""
    return min(sorted(table), key=lambda s: np.mean([table[s][scene] for scene in scenes]))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("settings", type=Path)
    parser.add_argument("root", type=Path)
    parser.add_argument("--scenes", default="")
    parser.add_argument("--settings", dest="candidates", default="",
                        help="comma-separated candidates (default: all)")
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()
    records = json.loads(args.settings.read_text())["records"]
    root = str(args.root)
    table: dict[str, dict[str, float]] = defaultdict(dict)
    for record in records:
        if Path(record["root"]).resolve() != args.root.resolve():
            continue
        name = f"{record['setting']}{'' if record['refine'] else ' no-refine'}"
        if args.candidates and name not in args.candidates.split(","):
            continue
        table[name][record["scene"]] = record["bad2"]
    scenes = sorted(next(iter(table.values())))
    if args.scenes:
        scenes = [s for s in scenes if s in args.scenes.split(",")]
    groups = scene_groups(args.root)
    group_of = {scene: groups.get(scene, scene) for scene in scenes}
    left_out: dict[str, float] = {}
    chosen_for: dict[str, str] = {}
    for group in sorted(set(group_of.values())):
        inside = [s for s in scenes if group_of[s] == group]
        others = [s for s in scenes if group_of[s] != group]
        setting = choose(table, others)
        chosen_for[group] = setting
        for scene in inside:
            left_out[scene] = table[setting][scene]
    final = choose(table, scenes)
    rows = [(s, group_of[s], chosen_for[group_of[s]], left_out[s], table[final][s],
             min(table[t][s] for t in table)) for s in scenes]
    rows.append(("mean", "", "", float(np.mean(list(left_out.values()))),
                 float(np.mean([table[final][s] for s in scenes])),
                 float(np.mean([min(table[t][s] for t in table) for s in scenes]))))
    print_table(f"bad-2 %, leave-one-group-out over {root} (final choice: {final})",
                ["scene", "group", "chosen without its group", "left-out bad-2",
                 "final choice", "best-of (oracle)"], rows)
    means = {t: float(np.mean([table[t][s] for s in scenes])) for t in sorted(table)}
    print_table("mean bad-2 % per setting (all scenes)", ["setting", "bad-2"],
                list(means.items()))
    if args.json:
        write_json(args.json, {"root": root, "scenes": scenes, "groups": group_of,
                               "chosen_without_group": chosen_for, "left_out_bad2": left_out,
                               "left_out_mean": rows[-1][3], "final": final,
                               "mean_per_setting": means})


if __name__ == "__main__":
    main()
