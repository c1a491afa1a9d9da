"""Does the census matching cost choose better than the forward-backward check between the flow
network's answer and DIS's (issue 50, item 5)? Stereo's self-fusion gained most from choosing
among its runs by how alike their matches look (docs/results/network-alone item 20); the flow
default's losses to DIS on large motions are confident, consistent wrong answers of the
network that the forward-backward check keeps (large-motion.md).

Pairs: every pair of ``flow_dis_fusion.pairs`` (the stereo scenes of the roots read as flow
pairs, real-dev's KITTI flow scene, scikit-image's Motorcycle) at its own size (``@x1``), the
stereo scenes enlarged by 2 and 3 (``flow_large_motion.real_pairs``) and the 32 synthetic
street pairs (``flow_large_motion.street_pairs``).

1. ``record``: the flow default (``matchflow-hybrid``, every setting its own) runs on each pair;
   what it hands :func:`crossview.models.dense.dis_fusion.fuse_with_dis` (both frames and the
   network's fields of both directions at the working size: the pair's own up to 0.5 MP) and
   what the fusion returns are kept, one ``.npz`` per pair in CACHE (a rerun skips the pairs it
   holds).
2. ``score``: per cached pair the recorded default is scored (``default``) and the choices below
   are made between the network's fields ``N`` and DIS's two runs (``D1`` on the grey frames,
   ``D2`` on their rank transforms; :data:`FLOW_DIS_RUNS`), each both ways: raw, and ``+``
   polished as the fusion polishes (edge medians, variational refinement:
   :func:`crossview.models.dense.dis_fusion.polished`):

   - ``fb``: the forward-backward rule the fusion shipped before this study
     (``flow_dis_fusion.forward_backward_choice``, ``D1`` then ``D2``); ``fb+`` was the default
     when the committed JSON was recorded (``default`` equals it there);
   - ``oracle``: per pixel the candidate nearest the truth (raw; a bound, not a rule; for pairs
     run at a working size below their own, the truth is resized to it bilinearly, so the bound
     is loose at sparse or occluded truth);
   - ``censusK``: per pixel the candidate with the lowest census cost
     (:func:`crossview.geometry.census_arrays.census_cost`, ``vertical``) over K x K px;
   - ``consistentK``: the lowest census cost among the candidates whose forward-backward error
     is at most ``FUSION_DIS_FB_PX`` (0.5 px), the network's where none is
     (:func:`crossview.models.dense.dis_fusion.census_choice`; shipped with K = 9).

   Score: EPE of the forward flow on the known pixels, brought to the pair's size as the
   default brings it (:func:`at_size`). The JSON (written after every pair; a
   rerun skips the pairs it holds) has ``{pair: {"root", "factor", "motion_max", "dis" (DIS
   medium alone on the pair's own frames, as large-motion.md scores it), "network",
   "dis_grey", "dis_rank" (the candidates alone), setting: EPE}}``.
3. ``choose``: the mean EPE per setting over the real-train pairs (all three sizes), the
   leave-one-group-out choice among the polished rules (the groups of real-train's README),
   and per setting the pairs ahead of DIS and the means per kind of pair.

Run (one thread each; ``score`` takes ``--part I/N`` to split the pairs over processes)::

    OMP_NUM_THREADS=1 python docs/results/real-flow/flow_census_choice.py record /tmp/flow-cache \\
        ../shared/real-train ../shared/real-dev
    OMP_NUM_THREADS=1 python docs/results/real-flow/flow_census_choice.py score /tmp/flow-cache \\
        docs/results/real-flow/flow_census_choice.json ../shared/real-train ../shared/real-dev
    python docs/results/real-flow/flow_census_choice.py choose \\
        docs/results/real-flow/flow_census_choice.json ../shared/real-train
"""

from __future__ import annotations

import argparse
import json
import sys
from collections import Counter
from collections.abc import Callable
from itertools import chain
from pathlib import Path
from typing import Any

import numpy as np
import torch
import torch.nn.functional as F

import crossview
from crossview.data.image_batch import uint8_images
from crossview.geometry.census_arrays import census_codes, census_cost
from crossview.models.dense import inference
from crossview.models.dense.classical import dis_flow, grey_image
from crossview.models.dense.dis_fusion import (
    FLOW_DIS_RUNS,
    FLOW_EDGE_MEDIANS,
    census_choice,
    fuse_with_dis,
    polished,
)
from crossview.models.dense.rank_transform import rank_transform
from crossview.report import write_json

sys.path.insert(0, str(Path(__file__).parent))
sys.path.insert(1, str(Path(__file__).parents[1] / "real-stereo"))  # the stereo studies' helpers
from flow_dis_fusion import epe, forward_backward_choice, pairs
from flow_large_motion import real_pairs, street_pairs
from real_choice import scene_groups  # the groups of real-train's README

WINDOWS = (5, 9, 15, 25)


def every_pair(roots: list[str]):
    """``(key, root, factor, frame0, frame1, flow, known)`` of every pair (module docstring)."""
    for root, name, frame0, frame1, truth, known in pairs(roots):
        yield f"{name}@x1", root, 1, frame0, frame1, truth, known
    for key, root, factor, frame0, frame1, truth, known, _ in chain(street_pairs(16),
                                                                    real_pairs(roots)):
        yield key, root, factor, frame0, frame1, truth, known


def record(cache: Path, roots: list[str]) -> None:
    """Step 1 of the module docstring."""
    cache.mkdir(parents=True, exist_ok=True)
    model = crossview.load_model("matchflow-hybrid")
    seen: dict = {}

    def recording(x0, x1, field, **kwargs):
        seen.update(x0=x0, x1=x1, field=field, kwargs=kwargs)
        fused = fuse_with_dis(x0, x1, field, **kwargs)
        seen["fused"] = fused
        return fused

    inference.fuse_with_dis = recording
    for key, root, factor, frame0, frame1, truth, known in every_pair(roots):
        path = cache / f"{key}.npz"
        if path.is_file():
            continue
        seen.clear()
        crossview.estimate_flow(frame0, frame1, model=model)
        if seen["kwargs"] != {"runs": FLOW_DIS_RUNS, "medians": FLOW_EDGE_MEDIANS}:
            raise RuntimeError(f"{key}: the default's fusion ran with {seen['kwargs']}")
        first, second = uint8_images(seen["x0"])[0], uint8_images(seen["x1"])[0]
        np.savez(path, root=root, factor=factor, frame0=first, frame1=second,
                 field=seen["field"].float().numpy(), fused=seen["fused"].float().numpy(),
                 truth=np.asarray(truth, np.float32), known=np.asarray(known, bool))
        print(key, first.shape, flush=True)


def dis_runs(frame0: np.ndarray, frame1: np.ndarray) -> list[np.ndarray]:
    """DIS's runs from zero of the fusion (the first two of :data:`FLOW_DIS_RUNS`: grey, rank
    2), each both ways ``[2, H, W, 2]``."""
    out = []
    for radius in FLOW_DIS_RUNS[:2]:
        a, b = ((frame0, frame1) if radius is None else
                (rank_transform(grey_image(frame0), radius),
                 rank_transform(grey_image(frame1), radius)))
        out.append(np.stack([dis_flow(a, b), dis_flow(b, a)]))
    return out


def at_size(flow: np.ndarray, shape: tuple[int, int]) -> np.ndarray:
    """A flow ``[h, w, 2]`` at the working size brought to the pair's ``shape = (H, W)`` as the
    default brings its fields back (bilinear, x times ``W / w``, y times ``H / h``)."""
    h, w = flow.shape[:2]
    if (h, w) == shape:
        return flow
    out = F.interpolate(torch.from_numpy(flow).permute(2, 0, 1)[None], size=shape,
                        mode="bilinear", align_corners=False)[0].permute(1, 2, 0).numpy()
    return out * np.array([shape[1] / w, shape[0] / h], np.float32)


def cached_row(data: dict, frame0: np.ndarray, frame1: np.ndarray, truth: np.ndarray,
               known: np.ndarray) -> dict:
    """The columns a study's row of a cached pair (``data``; its frames ``[H, W, 3]``, truth
    ``[H, W, 2]`` on ``known [H, W]``) starts with: ``root``, ``factor``, ``motion_max`` (px,
    the largest true motion), ``dis`` (DIS medium alone on the pair's own frames) and
    ``default`` (the recorded fusion's forward flow), EPE px at the pair's size."""
    return {"root": str(data["root"]), "factor": int(data["factor"]),
            "motion_max": float(np.linalg.norm(truth, axis=-1)[known].max()),
            "dis": epe(dis_flow(frame0, frame1), truth, known),
            "default": epe(at_size(data["fused"][0], truth.shape[:2]), truth, known)}


def score_pair(data: dict, frame0: np.ndarray, frame1: np.ndarray, truth: np.ndarray,
               known: np.ndarray) -> dict:
    """The JSON row of one cached pair (module docstring): its working-size frames, fields and
    fusion in ``data``, scored against the pair's ``truth [H, W, 2]`` on ``known [H, W]``;
    DIS alone runs on the pair's own frames ``[H, W, 3]``."""
    first, second = data["frame0"], data["frame1"]
    network = data["field"]
    candidates = [network, *dis_runs(first, second)]
    fb = network
    for run in candidates[1:]:
        fb = forward_backward_choice(torch.from_numpy(fb), torch.from_numpy(run)).numpy()
    stack = np.stack(candidates)  # [C, 2, h, w, 2]
    codes = [census_codes(first), census_codes(second)]
    shape = truth.shape[:2]

    def error(flow: np.ndarray) -> float:
        """EPE of the forward flow of ``flow [2, h, w, 2]`` at the pair's size."""
        return epe(at_size(flow[0], shape), truth, known)

    def polish(flow: np.ndarray) -> np.ndarray:
        return np.stack([polished(flow[0], first, second), polished(flow[1], second, first)])

    def pick(index: np.ndarray) -> np.ndarray:
        return np.take_along_axis(stack, index[None, ..., None], 0)[0]

    row = {**cached_row(data, frame0, frame1, truth, known), "fb": error(fb),
           "fb+": error(polish(fb))}
    for name, flow in zip(("network", "dis_grey", "dis_rank"), candidates, strict=True):
        row[name] = error(flow)
    truth_small = at_size(np.nan_to_num(truth), stack.shape[2:4])
    distance = np.linalg.norm(stack[:, 0] - truth_small, axis=-1)  # [C, h, w]
    row["oracle"] = error(pick(np.broadcast_to(distance.argmin(0), stack.shape[1:4])))
    for window in WINDOWS:
        costs = np.stack([census_cost(codes, c, window, vertical=True) for c in candidates])
        rules = {f"census{window}": pick(costs.argmin(0)),
                 f"consistent{window}": census_choice(candidates, codes, window=window)}
        for name, flow in rules.items():
            row[name] = error(flow)
            row[f"{name}+"] = error(polish(flow))
    return row


def score(cache: Path, out: Path, roots: list[str], part: tuple[int, int],
          row: Callable[..., dict] | None = None) -> None:
    """Step 2 of the module docstring, on every ``part[1]``-th pair from the ``part[0]``-th;
    ``row``: what scores a cached pair, with :func:`score_pair`'s arguments (``None``: it)."""
    row = score_pair if row is None else row
    table = json.loads(out.read_text()) if out.is_file() else {}
    for index, (key, _, _, frame0, frame1, truth, known) in enumerate(every_pair(roots)):
        if index % part[1] != part[0] or key in table:
            continue
        with np.load(cache / f"{key}.npz") as data:
            table[key] = row(dict(data), frame0, frame1, truth, known)
        print(key, {k: round(v, 3) for k, v in table[key].items() if isinstance(v, float)},
              flush=True)
        write_json(out, table)


def choose(tables: list[Path], train_root: Path) -> None:
    """Step 3 of the module docstring."""
    table: dict = {}
    for path in tables:
        for key, row in json.loads(path.read_text()).items():  # rows merged per pair
            if key != "machine":
                table.setdefault(key, {}).update(row)
    groups = scene_groups(train_root)
    settings = [k for k in next(iter(table.values())) if k not in ("root", "factor",
                                                                   "motion_max")]
    polished_rules = [k for k in settings if k.endswith("+")]
    train = [k for k in table if "real-train" in table[k]["root"]]
    left_out: dict[str, tuple[str, float]] = {}
    folds: Counter = Counter()
    for group in sorted({groups[k.split("@")[0]] for k in train}):
        others = [k for k in train if groups[k.split("@")[0]] != group]
        chosen = min(polished_rules, key=lambda s: np.mean([table[k][s] for k in others]))
        folds[chosen] += 1
        left_out.update({k: (chosen, table[k][chosen]) for k in train
                         if groups[k.split("@")[0]] == group})
    print(f"real-train pairs: {len(train)}; leave-one-group-out left-out mean EPE "
          f"{np.mean([v for _, v in left_out.values()]):.3f} (default "
          f"{np.mean([table[k]['default'] for k in train]):.3f}), chosen (folds) "
          f"{dict(folds)}")
    kinds = {"real-train": lambda k: "real-train" in table[k]["root"],
             "real-dev x1": lambda k: "real-dev" in table[k]["root"] and k.endswith("@x1"),
             "real-dev x2, x3": lambda k: "real-dev" in table[k]["root"]
             and not k.endswith("@x1"),
             "streets": lambda k: table[k]["root"].startswith("synthetic"),
             "motorcycle": lambda k: table[k]["root"] == "scikit-image"}
    print("setting | " + " | ".join(f"{kind} EPE (ahead of DIS)" for kind in kinds))
    for setting in settings:
        cells = []
        for test in kinds.values():
            keys = [k for k in table if test(k)]
            ahead = sum(table[k][setting] < table[k]["dis"] for k in keys)
            cells.append(f"{np.mean([table[k][setting] for k in keys]):.3f} "
                         f"({ahead}/{len(keys)})")
        print(f"{setting} | " + " | ".join(cells))


def scoring_steps(description: str) -> tuple[argparse.ArgumentParser, Any]:
    """A study's command line with the ``score`` (``cache out roots... [--part I/N]``) and
    ``choose`` (``tables... train_root``) steps of this one; returns the parser and its
    subparsers (for more steps)."""
    parser = argparse.ArgumentParser(description=description)
    steps = parser.add_subparsers(dest="step", required=True)
    step = steps.add_parser("score")
    step.add_argument("cache", type=Path)
    step.add_argument("out", type=Path)
    step.add_argument("roots", nargs="+")
    step.add_argument("--part", default="0/1", help="I/N: the I-th of N shares of the pairs")
    step = steps.add_parser("choose")
    step.add_argument("tables", type=Path, nargs="+")
    step.add_argument("train_root", type=Path)
    return parser, steps


def part(args: argparse.Namespace) -> tuple[int, int]:
    """``--part I/N`` as ``(I, N)``."""
    index, count = (int(v) for v in args.part.split("/"))
    return index, count


def main() -> None:
    parser, steps = scoring_steps(__doc__.splitlines()[0])
    step = steps.add_parser("record")
    step.add_argument("cache", type=Path)
    step.add_argument("roots", nargs="+")
    args = parser.parse_args()
    if args.step == "record":
        record(args.cache, args.roots)
    elif args.step == "score":
        score(args.cache, args.out, args.roots, part(args))
    else:
        choose(args.tables, args.train_root)


if __name__ == "__main__":
    main()
