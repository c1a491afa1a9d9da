"""The speed/accuracy curve of the fused stereo default: every setting of ``speed_settings.py``
as time per pair (``speed_timing.py``, 375x1242) against mean bad-2 on the development scenes,
the presets marked, OpenCV SGBM (holes filled) on the same axes; the flow presets against
OpenCV DIS beside it when ``flow_presets.py``'s record is given.

Run: ``python docs/results/speed-presets/curve.py SETTINGS_DEV.json TIMING.json CHOICE.json
EVAL_DEV.json OUT.png [--add SETTINGS_DEV.json TIMING.json] [--flow FLOW.json]`` (EVAL_DEV: a
``crossview eval --json`` of the development scenes, for SGBM filled's bad-2; ``--add``: more
settings, as ``working_size.py`` records and times them).
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt
import numpy as np
from speed_choice import bad2_table

SIZE = "375x1242"


def stereo_panel(axes: plt.Axes, args: argparse.Namespace) -> None:
    dev, seconds = {}, {}
    for settings, timing in [(args.settings, args.timing), *args.add]:
        dev |= bad2_table(settings)
        for row in json.loads(timing.read_text())["rows"]:  # SGBM's: the first file's
            if row["size"] == SIZE:
                seconds.setdefault(row["setting"], row["median_s"])
    chosen = json.loads(args.choice.read_text())["chosen"]
    means = {s: float(np.mean(list(t.values()))) for s, t in dev.items()}
    shown = [s for s in means if s in seconds]
    axes.scatter([seconds[s] for s in shown], [means[s] for s in shown], s=14, c="0.6",
                 label="settings (scale, SGBM runs, medians)")
    for preset, pick in chosen.items():
        setting = pick["setting"]
        if setting in seconds:
            axes.scatter(seconds[setting], means[setting], s=60, zorder=3)
            right = seconds[setting] > max(seconds.values()) / 2  # label on the inner side
            axes.annotate(preset, (seconds[setting], means[setting]),
                          textcoords="offset points", xytext=(-6 if right else 6, 6),
                          ha="right" if right else "left", fontsize=7)
    baselines = {b["name"]: b["mean"]["bad2_holes"]
                 for b in json.loads(args.eval.read_text())["baselines"]}
    sgbm = seconds.get("SGBM filled")
    if sgbm is not None:
        axes.scatter(sgbm, baselines["SGBM filled"], marker="s", s=60, c="tab:red", zorder=3,
                     label="OpenCV SGBM, holes filled")
    axes.set_xscale("log")
    axes.set_xlabel(f"seconds per pair at {SIZE} (2 threads)")
    axes.set_ylabel("mean bad-2 %, 8 development scenes")
    axes.set_title("stereo: matchstereo-hybrid fused")
    axes.legend(fontsize=7, loc="upper right")


def flow_panel(axes: plt.Axes, flow: dict) -> None:
    for name, point in flow["points"].items():
        marker, colour = ("s", "tab:red") if name == "DIS" else ("o", None)
        axes.scatter(point["seconds"], point["dev_epe"], marker=marker, s=60, c=colour)
        axes.annotate(name, (point["seconds"], point["dev_epe"]), textcoords="offset points",
                      xytext=(6, 4), fontsize=7)
    axes.set_xscale("log")
    axes.set_xlabel(f"seconds per pair at {flow.get('size', SIZE)} (2 threads)")
    axes.set_ylabel("mean EPE px, development pairs")
    axes.set_title("flow: matchflow-hybrid fused")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    for name in ("settings", "timing", "choice", "eval", "out"):
        parser.add_argument(name, type=Path)
    parser.add_argument("--flow", type=Path)
    parser.add_argument("--add", nargs=2, type=Path, action="append", default=[],
                        metavar=("SETTINGS_DEV", "TIMING"),
                        help="more settings' development records and times (working_size.py)")
    args = parser.parse_args()
    flow = json.loads(args.flow.read_text()) if args.flow else None
    figure, panels = plt.subplots(1, 2 if flow else 1, figsize=(11 if flow else 6, 4.2),
                                  squeeze=False)
    stereo_panel(panels[0][0], args)
    if flow:
        flow_panel(panels[0][1], flow)
    figure.tight_layout()
    figure.savefig(args.out, dpi=110)


if __name__ == "__main__":
    main()
