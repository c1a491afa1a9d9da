"""How much a per-pixel choice between the fused default and its network could gain at best.

Reads the ``.npz`` files of ``record.py`` (one per scene: the left view's network disparity as
the fusion receives it, SGBM's checked disparity, the filled, medianed and fused disparities,
the ground truth) and prints, per scene, bad-2 (% of known pixels with an error above 2 px)
of: the fused default, the network, the oracle that takes whichever of fused / network is
right, the oracle over every candidate (fused, network, filled, medianed); and the points the
fused default gets wrong inside SGBM's holes, of those where the network is right, and where
the network is right outside the holes. A learned fusion that picks per pixel among these
candidates cannot go below the oracle.

Run: ``python docs/results/network-alone/oracle.py RECORD_DIR OUT.json``
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np

from crossview.report import write_json

COLUMNS = ("fused", "network", "oracle_fused_network", "oracle_all", "hole_wrong",
           "hole_wrong_network_right", "answered_wrong_network_right")


def right(disparity: np.ndarray, truth: np.ndarray, known: np.ndarray) -> np.ndarray:
    """Known pixels ``[N]`` bool: within 2 px of the truth (a NaN is wrong)."""
    return np.abs(np.nan_to_num(disparity, nan=1e9) - truth)[known] <= 2.0


def scene_row(path: Path) -> dict[str, float]:
    """The columns of :data:`COLUMNS` for one recorded scene (%)."""
    z = np.load(path)
    truth = z["truth"]
    known = np.isfinite(truth)
    fused, network, filled, medianed = (right(z[f"left_{name}"], truth, known)
                                        for name in ("fused", "network", "filled", "medianed"))
    hole = ~np.isfinite(z["left_classical"])[known]
    pct = lambda mask: float(100 * mask.mean())  # noqa: E731
    return dict(zip(COLUMNS, (100 - pct(fused), 100 - pct(network), 100 - pct(fused | network),
                              100 - pct(fused | network | filled | medianed),
                              pct(hole & ~fused), pct(hole & ~fused & network),
                              pct(~hole & ~fused & network)), strict=True))


def main(record_dir: Path, out: Path) -> None:
    rows = {path.stem: scene_row(path) for path in sorted(record_dir.glob("*.npz"))}
    means = {}
    for root in sorted({name.split("__")[0] for name in rows}):
        inside = [row for name, row in rows.items() if name.startswith(f"{root}__")]
        means[root] = {c: float(np.mean([row[c] for row in inside])) for c in COLUMNS}
    print("| scene | " + " | ".join(COLUMNS) + " |")
    print("|---" * (len(COLUMNS) + 1) + "|")
    for name, row in [*rows.items(), *((f"**mean {k}**", v) for k, v in means.items())]:
        print(f"| {name} | " + " | ".join(f"{row[c]:.2f}" for c in COLUMNS) + " |")
    write_json(out, {"columns": COLUMNS, "scenes": rows, "means": means})


if __name__ == "__main__":
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    main(Path(sys.argv[1]), Path(sys.argv[2]))
