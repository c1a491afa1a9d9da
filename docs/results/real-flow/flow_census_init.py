"""Does DIS started from the network's flow earn a place among the flow fusion's candidates
(issue 50, item 5)? ``flow_census_candidates.py`` found it lowers the raw census choice's EPE
on the large motions; this study polishes as the fusion polishes and chooses by
leave-one-group-out.

On the pairs ``flow_census_choice.py record`` cached (the 142 pairs of that study: the
real-train and real-dev stereo scenes as flow at their own size and enlarged 2 and 3 times,
KITTI's flow pair, Motorcycle, 32 synthetic street pairs), per pixel of each direction the
census choice (:func:`crossview.models.dense.dis_fusion.census_choice`, the shipped threshold
and window) among:

- ``A``: the shipped candidates (the network's fields, DIS on the grey frames, DIS on their
  rank transforms);
- ``B``: ``A`` and DIS (medium, grey frames) started from the network's fields, both ways
  (``flow_census_candidates.dis_from``);
- ``E``: ``A`` and DIS started from ``A``'s choice (a second round; shipped since);
- ``F``: ``E``'s candidates, but where none is consistent the last (DIS started from the
  choice) instead of the network's;
- ``G``: ``E``'s candidates, but where none is consistent the one with the lowest census cost;
- ``R``: ``A`` and DIS on the rank transforms (radius 2) started from ``A``'s choice;
- ``H{t}``: ``E``'s candidates, but where none is consistent the last where the network's own
  forward-backward error is above ``t`` px (:data:`FALLBACK_PX`), the network's elsewhere.

Each raw and ``+`` polished (edge medians, variational refinement:
:func:`crossview.models.dense.dis_fusion.polished`). Score: EPE of the forward flow on the known
pixels at the pair's size (``flow_census_choice.at_size``); ``default`` is the recorded
default (``A+`` equals it in the committed JSON, recorded before ``E`` shipped; a cache
recorded since holds ``E+``) and ``dis`` DIS medium alone on the pair's own frames. The JSON
(``{pair: {"root", "factor", "motion_max", "dis", "default", setting: EPE}}``, written after
every pair; a rerun skips the pairs it holds) is read by ``choose``: the leave-one-group-out
choice among the polished rules over the real-train pairs (``flow_census_choice.choose``) and
the pairs ahead of DIS among the 104 moving 100 px and more (real scenes enlarged 2 and 3
times, the streets). ``time``: KITTI's flow pair resized to 375x1242 (area), the bundled
``matchflow-hybrid`` with its own settings (``best``) making the fusion's first two DIS runs
(``A``) or all three (``E``: :data:`~crossview.models.dense.dis_fusion.FLOW_DIS_RUNS` since this
study), in turn for ``--rounds`` rounds; median seconds per pair (ratios within the one run:
the machine is shared); JSON ``{"A": s, "E": s}``. ``rows``: the same pair and default, its
census costs computed for the two directions side by side (the fusion's thread pool, shipped
since) or in turn (the private ``dis_fusion._choice_cost`` wrapped to map over the rows on the
calling thread), in turn for ``--rounds`` rounds; median seconds and whether the flows are
equal; JSON ``{"side by side": s, "in turn": s, "equal": bool}``.

Run (``--part I/N`` splits the pairs over processes)::

    OMP_NUM_THREADS=1 python docs/results/real-flow/flow_census_init.py score /tmp/flow-cache \\
        docs/results/real-flow/flow_census_init.json ../shared/real-train ../shared/real-dev
    python docs/results/real-flow/flow_census_init.py choose \\
        docs/results/real-flow/flow_census_init.json ../shared/real-train
    OMP_NUM_THREADS=2 python docs/results/real-flow/flow_census_init.py time \
        docs/results/real-flow/flow_census_init_timing.json ../shared/real-dev
    OMP_NUM_THREADS=2 python docs/results/real-flow/flow_census_init.py rows \
        docs/results/real-flow/flow_census_rows_timing.json ../shared/real-dev
"""

from __future__ import annotations

import dataclasses
import json
import sys
import time
from pathlib import Path

import cv2
import numpy as np
import torch

import crossview
from crossview.data.io import read_image
from crossview.geometry.census_arrays import census_codes, census_cost
from crossview.geometry.consistency import consistency_error
from crossview.models.dense import dis_fusion
from crossview.models.dense.classical import dis_flow, grey_image
from crossview.models.dense.dis_fusion import (
    FLOW_CENSUS_WINDOW,
    FUSION_DIS_FB_PX,
    census_choice,
    polished,
)
from crossview.models.dense.rank_transform import rank_transform
from crossview.report import print_table, write_json

sys.path.insert(0, str(Path(__file__).parent))
sys.path.insert(1, str(Path(__file__).parents[1] / "real-stereo"))  # the stereo studies' helpers
from flow_census_choice import (
    at_size,
    cached_row,
    choose,
    dis_runs,
    part,
    score,
    scoring_steps,
)
from flow_census_presets import KITTI_SIZE
from flow_dis_fusion import epe

FALLBACK_PX = (2, 8, 32)


def started_from(first: np.ndarray, second: np.ndarray, flow: np.ndarray) -> np.ndarray:
    """DIS on the frames (``[H, W, 3]`` RGB or ``[H, W]`` grey) started from each direction of
    ``flow [2, H, W, 2]`` -> ``[2, H, W, 2]``."""
    return np.stack([dis_flow(first, second, flow[0]), dis_flow(second, first, flow[1])])


def fallback_choices(candidates: list[np.ndarray], codes: list[np.ndarray]
                     ) -> dict[str, np.ndarray]:
    """``F``, ``G`` and ``H{t}`` of the module docstring over ``candidates`` (``[2, H, W, 2]``
    each)."""
    errors = np.stack([consistency_error(torch.from_numpy(c))[0].numpy() for c in candidates])
    consistent = errors <= FUSION_DIS_FB_PX
    costs = np.stack([census_cost(codes, c, FLOW_CENSUS_WINDOW, vertical=True)
                      for c in candidates])
    among = np.where(consistent, costs, np.inf).argmin(0)
    stack = np.stack(candidates)
    last = np.full(among.shape, len(candidates) - 1)
    fallbacks = {"F": last, "G": costs.argmin(0),
                 **{f"H{t}": np.where(errors[0] > t, last, 0) for t in FALLBACK_PX}}
    return {name: np.take_along_axis(
        stack, np.where(consistent.any(0), among, fallback)[None, ..., None], 0)[0]
        for name, fallback in fallbacks.items()}


def score_pair(data: dict, frame0: np.ndarray, frame1: np.ndarray, truth: np.ndarray,
               known: np.ndarray) -> dict:
    """The JSON row of one cached pair (module docstring)."""
    first, second = data["frame0"], data["frame1"]
    network = data["field"]
    codes = [census_codes(first), census_codes(second)]
    shipped = [network, *dis_runs(first, second)]
    chosen = census_choice(shipped, codes)
    four = [*shipped, started_from(first, second, chosen)]
    ranked = [rank_transform(grey_image(f), 2) for f in (first, second)]
    flows = {"A": chosen,
             "B": census_choice([*shipped, started_from(first, second, network)], codes),
             "E": census_choice(four, codes), **fallback_choices(four, codes),
             "R": census_choice([*shipped, started_from(*ranked, chosen)], codes)}
    shape = truth.shape[:2]

    def error(flow: np.ndarray) -> float:
        """EPE of the forward flow of ``flow [2, h, w, 2]`` at the pair's size."""
        return epe(at_size(flow[0], shape), truth, known)

    row = cached_row(data, frame0, frame1, truth, known)
    for name, flow in flows.items():
        row[name] = error(flow)
        row[f"{name}+"] = error(np.stack([polished(flow[0], first, second),
                                          polished(flow[1], second, first)]))
    return row


SETTINGS = ("A", "B", "E", "F", "G", "R", *(f"H{t}" for t in FALLBACK_PX))


def large_motions(tables: list[Path], settings: tuple[str, ...] = SETTINGS) -> None:
    """Per polished setting of ``settings`` (and the recorded default) the mean EPE over the
    pairs moving 100 px and more and how many of them it leads DIS on."""
    table: dict = {}
    for path in tables:
        for key, row in json.loads(path.read_text()).items():  # rows merged per pair
            if key != "machine":
                table.setdefault(key, {}).update(row)
    keys = [k for k in table if not k.endswith("@x1")]
    for setting in ("default", *(f"{s}+" for s in settings)):
        ahead = [k for k in keys if table[k][setting] < table[k]["dis"]]
        print(f"large motions, {setting}: mean EPE "
              f"{np.mean([table[k][setting] for k in keys]):.3f} (DIS "
              f"{np.mean([table[k]['dis'] for k in keys]):.3f}), ahead of DIS on "
              f"{len(ahead)}/{len(keys)}; behind: {sorted(set(keys) - set(ahead))}")


def kitti_frames(dev_root: Path) -> tuple[np.ndarray, np.ndarray]:
    """KITTI's flow pair of ``dev_root`` resized to 375x1242 (area)."""
    return tuple(cv2.resize(read_image(dev_root / "kitti2012_flow_000045" / name), KITTI_SIZE,
                            interpolation=cv2.INTER_AREA) for name in ("frame0.png", "frame1.png"))


def rows_step(out: Path, dev_root: Path, rounds: int) -> None:
    """The ``rows`` step of the module docstring."""
    frames = kitti_frames(dev_root)
    model = crossview.load_model("matchflow-hybrid")
    pooled = dis_fusion._choice_cost

    def in_turn(candidate: np.ndarray, codes: list, window: int,
                mapper: object = map) -> tuple[np.ndarray, np.ndarray]:  # pool.map unused
        return pooled(candidate, codes, window)

    ways = {"side by side": pooled, "in turn": in_turn}
    seconds: dict[str, list[float]] = {name: [] for name in ways}
    flows: dict[str, np.ndarray] = {}
    crossview.estimate_flow(*frames, model=model)  # warm-up
    try:
        for _ in range(rounds):
            for name, way in ways.items():
                dis_fusion._choice_cost = way
                start = time.perf_counter()
                flows[name] = crossview.estimate_flow(*frames, model=model).flow.numpy()
                seconds[name].append(time.perf_counter() - start)
    finally:
        dis_fusion._choice_cost = pooled
    medians = {k: float(np.median(v)) for k, v in seconds.items()}
    equal = bool(np.array_equal(flows["side by side"], flows["in turn"]))
    write_json(out, {**medians, "equal": equal})
    print_table("median s per pair at 375x1242 (best)", ("side by side", "in turn", "equal"),
                [(medians["side by side"], medians["in turn"], str(equal))])


def time_step(out: Path, dev_root: Path, rounds: int) -> None:
    """The ``time`` step of the module docstring."""
    frame0, frame1 = kitti_frames(dev_root)
    model = crossview.load_model("matchflow-hybrid")
    own = model.fused_network
    settings = {"A": dataclasses.replace(own, classical_runs=2),
                "E": dataclasses.replace(own, classical_runs=3)}
    seconds: dict[str, list[float]] = {name: [] for name in settings}
    crossview.estimate_flow(frame0, frame1, model=model)  # warm-up
    for _ in range(rounds):
        for name, setting in settings.items():
            model.fused_network = setting
            start = time.perf_counter()
            crossview.estimate_flow(frame0, frame1, model=model)
            seconds[name].append(time.perf_counter() - start)
    model.fused_network = own
    medians = {k: float(np.median(v)) for k, v in seconds.items()}
    write_json(out, medians)
    print_table("median s per pair at 375x1242 (best)", ("A: two DIS runs", "E: three", "ratio"),
                [(medians["A"], medians["E"], medians["E"] / medians["A"])])


def main() -> None:
    parser, steps = scoring_steps(__doc__.splitlines()[0])
    for name in ("time", "rows"):
        step = steps.add_parser(name)
        step.add_argument("out", type=Path)
        step.add_argument("dev_root", type=Path)
        step.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    if args.step == "time":
        time_step(args.out, args.dev_root, args.rounds)
    elif args.step == "rows":
        rows_step(args.out, args.dev_root, args.rounds)
    elif args.step == "score":
        score(args.cache, args.out, args.roots, part(args), score_pair)
    else:
        choose(args.tables, args.train_root)
        large_motions(args.tables)


if __name__ == "__main__":
    main()
