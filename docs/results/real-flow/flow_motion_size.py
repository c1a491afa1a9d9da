"""A working size set by the pair's motion: the flow default on large motions (issue 50 item 5,
second step after ``flow_large_motion.py``).

The flow network was trained on motions of a few tens of pixels; on pairs whose motions reach
100-400 px its answer can be consistently wrong, which the forward-backward check does not
catch (large-motion.md). A run at a smaller working size shrinks the motions with the pair.
Rule ``motion{M}``: OpenCV DIS on the grey frames shrunk to at most :data:`PROBE_PIXELS` pixels
measures the pair's motion, the 95th percentile of ``|flow|`` scaled back to the pair's size,
``p95``; the default then runs whole (network and fusion, ``size=``) at the pair's size times
``min(cap, M / p95)`` (``cap``: the shipped 0.5 MP working size), each side at least
:data:`LEAST_SIDE` px. ``shipped``: the default as it is.

Pairs: the stereo scenes of ``../shared/real-train`` as flow pairs at their own size and
enlarged 2 and 3 times (``flow_large_motion.real_pairs``: choice by leave-one-group-out over
real-train's groups, by mean EPE), of ``../shared/real-dev`` and the held-out synthetic street
pairs (``flow_large_motion.street_pairs``; report only). EPE on the known pixels, with DIS
medium at the pair's size beside. Resumable: the JSON is written after every pair.

Run: ``OMP_NUM_THREADS=2 python docs/results/real-flow/flow_motion_size.py OUT.json
../shared/real-train ../shared/real-dev``
"""

from __future__ import annotations

import json
import math
import sys
from itertools import chain
from pathlib import Path

import cv2
import numpy as np

import crossview
from crossview.baselines import dis_flow
from crossview.report import print_table, write_json

sys.path.insert(0, str(Path(__file__).parent))
sys.path.insert(1, str(Path(__file__).parents[1] / "real-stereo"))  # the stereo studies' helpers
import flow_large_motion
from flow_dis_fusion import epe
from flow_large_motion import Pair, real_pairs, street_pairs
from real_choice import scene_groups

MOTIONS_PX = (48, 64, 96, 128)
PROBE_PIXELS = 100_000
LEAST_SIDE = 160
CAP_PIXELS = 500_000  # the shipped working size of matchflow-hybrid


def motion_p95(frame0: np.ndarray, frame1: np.ndarray) -> float:
    """The 95th percentile of ``|flow|`` (px at the frames' size) of DIS on the frames
    ``[H, W, 3]`` uint8 shrunk to at most :data:`PROBE_PIXELS` pixels."""
    h, w = frame0.shape[:2]
    factor = min(1.0, math.sqrt(PROBE_PIXELS / (h * w)))
    size = (max(1, round(w * factor)), max(1, round(h * factor)))
    small = [cv2.resize(np.ascontiguousarray(f), size, interpolation=cv2.INTER_AREA)
             for f in (frame0, frame1)]
    flow = dis_flow(*small)
    return float(np.percentile(np.linalg.norm(flow, axis=-1), 95)) / factor


def rule_size(shape: tuple[int, int], p95: float, motion: float) -> tuple[int, int] | None:
    """The working size ``(H, W)`` of rule ``motion{M}`` for a pair of ``shape``, or ``None``
    where it is the shipped run's (the pair's own size or the 0.5 MP cap)."""
    h, w = shape
    cap = min(1.0, math.sqrt(CAP_PIXELS / (h * w)))
    factor = min(cap, motion / max(p95, 1e-6))
    factor = max(factor, LEAST_SIDE / min(h, w))
    if factor >= cap:
        return None
    return max(LEAST_SIDE, math.floor(h * factor)), max(LEAST_SIDE, math.floor(w * factor))


def score(model: object, pair: Pair) -> dict:
    """One pair's row: ``p95``, DIS's EPE and each setting's EPE (``shipped``,
    ``motion{M}``) and working size."""
    _, root, factor, frame0, frame1, truth, known, _ = pair
    p95 = motion_p95(frame0, frame1)
    row = {"root": root, "factor": factor, "p95_probe": p95,
           "dis": epe(dis_flow(frame0, frame1), truth, known)}
    runs: dict[tuple[int, int] | None, float] = {}
    for name, size in (("shipped", None),
                       *((f"motion{m}", rule_size(frame0.shape[:2], p95, m)) for m in MOTIONS_PX)):
        if size not in runs:
            result = crossview.estimate_flow(frame0, frame1, model=model, size=size)
            runs[size] = epe(result.flow[0].permute(1, 2, 0).numpy(), truth, known)
        row[name], row[f"{name}_size"] = runs[size], size
    return row


def choice(table: dict[str, dict], groups: dict[str, str]) -> None:
    """Print the leave-one-group-out choice over the real-train pairs and every setting's
    means per root and factor, and how many pairs each setting leads DIS on."""
    settings = ["shipped", *(f"motion{m}" for m in MOTIONS_PX)]
    train = {k: r for k, r in table.items() if "real-train" in r["root"]}
    group_of = {k: groups.get(k.split("@")[0], k) for k in train}
    left_out, chosen = {}, {}
    for group in sorted(set(group_of.values())):
        others = [k for k in train if group_of[k] != group]
        best = min(settings, key=lambda s: np.mean([train[k][s] for k in others]))
        chosen[group] = best
        left_out.update({k: train[k][best] for k in train if group_of[k] == group})
    print(f"leave-one-group-out over {len(set(group_of.values()))} groups, {len(train)} "
          f"pairs: left-out mean EPE {np.mean(list(left_out.values())):.3f} (shipped "
          f"{np.mean([r['shipped'] for r in train.values()]):.3f}); chosen: {chosen}")
    rows = []
    for label in sorted({(r["root"], r["factor"]) for r in table.values()}, key=str):
        some = [r for r in table.values() if (r["root"], r["factor"]) == label]
        rows.append((f"{Path(label[0]).name} x{label[1]}", len(some),
                     *(f"{np.mean([r[s] for r in some]):.3f} ({sum(r[s] < r['dis'] for r in some)})"
                       for s in settings), f"{np.mean([r['dis'] for r in some]):.3f}"))
    print_table("mean EPE px (pairs ahead of DIS)", ["pairs", "n", *settings, "DIS"], rows)


def main(out: Path, roots: list[str]) -> None:
    table: dict[str, dict] = {}
    if out.is_file():
        table = {k: v for k, v in json.loads(out.read_text()).items() if k != "machine"}
    model = crossview.load_model("matchflow-hybrid")
    flow_large_motion.FACTORS = (1, 2, 3)
    for pair in chain(real_pairs(roots), street_pairs(16)):
        if pair[0] in table:
            continue
        table[pair[0]] = score(model, pair)
        print(pair[0], {k: round(v, 3) for k, v in table[pair[0]].items()
                        if isinstance(v, float)}, flush=True)
        write_json(out, table)
    train = next(root for root in roots if "real-train" in root)
    choice(table, scene_groups(Path(train)))


if __name__ == "__main__":
    if len(sys.argv) < 3:
        sys.exit(__doc__)
    main(Path(sys.argv[1]), sys.argv[2:])
