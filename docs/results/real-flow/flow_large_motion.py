"""The flow default against OpenCV DIS on pairs whose motions reach 100 px and more (issue 50,
item 5): the real stereo scenes read as flow pairs and enlarged two and three times, and fast
synthetic street scenes.

Pairs:

- every stereo scene of ``../shared/real-train`` (28) and of ``../shared/real-dev`` (8; not its
  KITTI flow scene nor scikit-image's Motorcycle) read as a flow pair
  (``flow_dis_fusion.pairs``: left to right moves by ``(-d, 0)``; the model is not told the
  motion is horizontal), enlarged by 2 and by 3 (``real_working_size.enlarged``, bicubic), the
  flow repeated (``np.kron``) and times the factor, the known mask repeated: ``NAME@x2``,
  ``NAME@x3``;
- ``--street`` (16) synthetic street flow pairs at each of two speeds, ``street150_00`` ...
  and ``street300_00`` ...: the flow engine's street layouts
  (:func:`crossview.data.synthetic.flow.random_flow_pair`, ``FlowConfig(size=(376, 1240),
  street_probability=1.0, max_flow=M)`` with M 150 and 300 px: the camera drives forward so
  that the nearer bottom corner moves 40-90 % of ``max_flow``, halved until the ground and the
  sky fit it) at KITTI's size, samples 0, 1, ... of the held-out split and seed
  (``split="heldout"``, :data:`crossview.data.synthetic.heldout.HELDOUT_SEED`: streams and
  photographs no training run sees; the same random draws at both speeds); frames rounded to
  uint8, known: every pixel a layer is seen at (``valid``, out-of-frame motions included, as
  KITTI's ``flow_occ``).

For each pair ``crossview.estimate_flow`` with ``matchflow-hybrid`` and its defaults (DIS
fusion, medians, variational refinement, the 0.5 MP working size) and DIS medium
(:func:`crossview.baselines.dis_flow`, as ``flow_dis_fusion.py`` scores it) are scored by EPE
on the known pixels (``flow_dis_fusion.epe``), each timed (seconds, one run, for information).
The JSON (:func:`crossview.report.write_json`, written after every pair; a rerun skips the
pairs it holds) has ``{pair: {"root", "factor", "motion_max", "motion_p95" (|motion| of the
known pixels, px), "default", "dis" (EPE px), "seconds_default", "seconds_dis", "flagged"
(share of the known pixels the default's forward-backward check marks inconsistent),
"default_consistent", "default_flagged", "dis_consistent", "dis_flagged" (EPE on the known
pixels the check keeps / flags), "default_fast", "dis_fast" (EPE on the known pixels that move
100 px or more; null if none)}}``, street pairs also ``"default_noc"``, ``"dis_noc"`` (EPE on
the pixels seen in both frames). The table, the summary per factor, root and group (the groups
of real-train's README) and the pairs DIS wins are printed at the end.

Run: ``OMP_NUM_THREADS=1 python docs/results/real-flow/flow_large_motion.py
docs/results/real-flow/flow_large_motion.json ../shared/real-train ../shared/real-dev``
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections.abc import Iterator
from itertools import chain
from pathlib import Path

import numpy as np

import crossview
from crossview.baselines import dis_flow
from crossview.data.synthetic.dataset import sample_generator
from crossview.data.synthetic.flow import FlowConfig, random_flow_pair
from crossview.data.synthetic.heldout import HELDOUT_SEED
from crossview.report import print_table, write_json

sys.path.insert(0, str(Path(__file__).parent))
sys.path.insert(1, str(Path(__file__).parents[1] / "real-stereo"))  # the stereo studies' helpers
from flow_dis_fusion import epe, pairs  # the stereo scenes as flow pairs, the score
from real_choice import scene_groups  # the groups of real-train's README
from real_working_size import enlarged  # the stereo study's bicubic enlargement

FACTORS = (2, 3)
FAST_PX = 100.0  # "large": the motions of 100 px and more
STREET_SIZE = (376, 1240)  # KITTI's
STREET_SPEEDS = (150, 300)  # max_flow px: the nearer bottom corner moves 40-90 % of it
Pair = tuple[str, str, int, np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray | None]


def real_pairs(roots: list[str]) -> Iterator[Pair]:
    """``(key, root, factor, frame0 [fH, fW, 3] uint8, frame1, flow [fH, fW, 2], known
    [fH, fW] bool, None)`` for every stereo scene of ``roots`` as a flow pair, enlarged by
    each of :data:`FACTORS` (all of factor 2 first)."""
    scenes = [p for p in pairs(roots) if p[0] != "scikit-image"
              and not (Path(p[0]) / p[1] / "flow.npy").is_file()]  # stereo scenes only
    for factor in FACTORS:
        for root, name, frame0, frame1, truth, known in scenes:
            yield (f"{name}@x{factor}", root, factor, enlarged(frame0, factor),
                   enlarged(frame1, factor),
                   np.kron(truth, np.ones((factor, factor, 1), np.float32)) * factor,
                   np.kron(known, np.ones((factor, factor), bool)), None)


def street_pairs(count: int) -> Iterator[Pair]:
    """``(key, root, 1, frame0 [376, 1240, 3] uint8, frame1, flow [376, 1240, 2], known
    [376, 1240] bool, seen in both frames [376, 1240] bool)`` of the first ``count`` held-out
    street samples at each of :data:`STREET_SPEEDS`."""
    for speed in STREET_SPEEDS:
        config = FlowConfig(size=STREET_SIZE, street_probability=1.0, max_flow=float(speed))
        for index in range(count):
            sample = random_flow_pair(sample_generator("flow", "heldout", HELDOUT_SEED, index),
                                      config, "heldout")
            frame0, frame1 = (np.clip(np.rint(sample[k]), 0, 255).astype(np.uint8)
                              for k in ("image0", "image1"))
            yield (f"street{speed}_{index:02d}", f"synthetic-street-{speed}", 1, frame0, frame1,
                   sample["flow"], np.asarray(sample["valid"], bool),
                   np.asarray(sample["valid_noc"], bool))


def masked_epe(flow: np.ndarray, truth: np.ndarray, mask: np.ndarray) -> float | None:
    """:func:`epe` of ``flow`` ``[H, W, 2]`` on ``mask`` ``[H, W]``; ``None`` if it is empty."""
    return epe(flow, truth, mask) if mask.any() else None


def score(model: object, pair: Pair) -> dict:
    """The JSON row of one pair (see the module docstring): the default and DIS on frames
    ``[H, W, 3]`` against the flow ``[H, W, 2]`` on the known pixels ``[H, W]``."""
    _, root, factor, frame0, frame1, truth, known, noc = pair
    start = time.perf_counter()
    result = crossview.estimate_flow(frame0, frame1, model=model)
    seconds_default = time.perf_counter() - start
    default = result.flow[0].permute(1, 2, 0).numpy()
    consistent = result.valid[0].numpy()
    start = time.perf_counter()
    classical = dis_flow(frame0, frame1)
    seconds_dis = time.perf_counter() - start
    motion = np.linalg.norm(truth, axis=-1)
    subsets = {"": known, "_consistent": known & consistent, "_flagged": known & ~consistent,
               "_fast": known & (motion >= FAST_PX)}
    if noc is not None:
        subsets["_noc"] = known & noc
    row = {"root": root, "factor": factor, "motion_max": float(motion[known].max()),
           "motion_p95": float(np.percentile(motion[known], 95)),
           "seconds_default": seconds_default, "seconds_dis": seconds_dis,
           "flagged": float((~consistent)[known].mean())}
    for suffix, mask in subsets.items():
        row[f"default{suffix}"] = masked_epe(default, truth, mask)
        row[f"dis{suffix}"] = masked_epe(classical, truth, mask)
    return row


def mean(rows: list[dict], key: str) -> float:
    """The mean of ``key`` over ``rows``."""
    return float(np.mean([row[key] for row in rows]))


def summary(table: dict[str, dict], roots: list[str]) -> None:
    """Print every pair's EPE (default, DIS), how many pairs the default leads, the mean EPE
    per factor, root and real-train group, and the pairs where DIS is better."""
    print_table("EPE px on the known pixels", ("pair", "factor", "max |motion|", "p95 |motion|",
                                               "default", "DIS", "default s", "flagged %"),
                [(key, row["factor"], row["motion_max"], row["motion_p95"], row["default"],
                  row["dis"], row["seconds_default"], 100 * row["flagged"])
                 for key, row in table.items()])
    rows = list(table.values())
    lead = [key for key, row in table.items() if row["default"] < row["dis"]]
    print(f"the default leads on {len(lead)} of {len(table)} pairs; mean EPE default "
          f"{mean(rows, 'default'):.3f}, DIS {mean(rows, 'dis'):.3f}")
    for label, keys in (("factor", "factor"), ("root", "root")):
        for value in sorted({row[keys] for row in rows}, key=str):
            some = [row for row in rows if row[keys] == value]
            wins = sum(row["default"] < row["dis"] for row in some)
            print(f"{label} {value}: {len(some)} pairs, default leads {wins}, mean EPE "
                  f"default {mean(some, 'default'):.3f}, DIS {mean(some, 'dis'):.3f}")
    train = next((root for root in roots if "real-train" in root), None)
    groups = scene_groups(Path(train)) if train else {}
    for group in sorted(set(groups.values())):
        some = [row for key, row in table.items() if groups.get(key.split("@")[0]) == group]
        if some:
            print(f"real-train group {group}: {len(some)} pairs, mean EPE default "
                  f"{mean(some, 'default'):.3f}, DIS {mean(some, 'dis'):.3f}")
    print("DIS better on:")
    for key, row in table.items():
        if row["default"] >= row["dis"]:
            print(f"  {key}: default {row['default']:.3f}, DIS {row['dis']:.3f}, max |motion| "
                  f"{row['motion_max']:.1f} px, p95 {row['motion_p95']:.1f} px")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("out", type=Path)
    parser.add_argument("roots", nargs="+")
    parser.add_argument("--street", type=int, default=16, help="synthetic street pairs per speed")
    parser.add_argument("--limit", type=int, default=None, help="pairs at most (a smoke test)")
    args = parser.parse_args()
    table: dict[str, dict] = {}
    if args.out.is_file():  # resume: keep the pairs already measured
        table = {k: v for k, v in json.loads(args.out.read_text()).items() if k != "machine"}
    model = crossview.load_model("matchflow-hybrid")
    done = 0
    for pair in chain(street_pairs(args.street), real_pairs(args.roots)):
        if args.limit is not None and done >= args.limit:
            break
        done += 1
        if pair[0] in table:
            continue
        table[pair[0]] = score(model, pair)
        row = table[pair[0]]
        print(pair[0], {k: round(v, 3) for k, v in row.items()
                        if isinstance(v, float)}, flush=True)
        write_json(args.out, table)
    summary(table, args.roots)


if __name__ == "__main__":
    main()
