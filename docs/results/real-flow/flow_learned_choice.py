"""A learned choice among the flow fusion's candidates (issue 50, item 3 for flow): does a small
per-pixel network trained on real scenes choose better than the census rule?

The fusion keeps per pixel one of four flows (the network's, DIS on the grey frames, DIS on
their rank transforms, DIS started from the choice among those three) by a hand rule: the
lowest census cost among the candidates consistent within 0.5 px, then within 2 px, else the
network's (:func:`crossview.models.dense.dis_fusion.census_choice`). The choice's oracle is far
below it (``flow_census_choice.json``). Here a per-candidate scorer, shared by the candidates
(an MLP of :data:`HIDDEN` units on the :data:`FEATURES` of :func:`features`: census cost, its
margin over the lowest, forward-backward error and the tiers it passes, flow size, distance
to the candidates' median, the flow's own roughness, the first frame's texture, which
candidate it is), keeps per pixel the candidate of the highest score. It is trained to lower
the expected end-point error (softmax of the scores over the candidates, errors capped at
:data:`CAP` px) on :data:`SAMPLES` known pixels of each training pair's forward flow.

Steps, on the pairs ``flow_census_choice.py record`` cached:

1. ``extract``: per pair, the four candidates (the restart from the shipped rule's choice),
   their features and errors against the truth at the working size, on a fixed random sample
   of known pixels (``SAMPLES/KEY.npz``).
2. ``score``: leave-one-group-out over real-train's groups: per fold a scorer trained on the
   other groups' samples (a fixed seed) chooses on each held-out pair (among the first three,
   DIS restarted from that choice, then among the four), the forward flow polished as the
   fusion polishes it, EPE at the pair's size (``learned+``); the scorer trained on every
   real-train pair does the same on the development pairs and the streets. JSON rows as
   ``flow_census_retune.py``'s (``dis``, ``default``, ``learned+``); ``choose`` prints the
   means per kind and the large motions.

Run::

    OMP_NUM_THREADS=1 python docs/results/real-flow/flow_learned_choice.py extract \\
        /tmp/flow-cache /tmp/flow-samples ../shared/real-train ../shared/real-dev --part I/2
    OMP_NUM_THREADS=1 python docs/results/real-flow/flow_learned_choice.py score \\
        /tmp/flow-cache /tmp/flow-samples OUT_I.json ../shared/real-train ../shared/real-dev \\
        --part I/2
    python docs/results/real-flow/flow_learned_choice.py choose OUT_0.json OUT_1.json \\
        ../shared/real-train
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from pathlib import Path

import cv2
import numpy as np
import torch
from torch import nn

from crossview.geometry.census_arrays import census_codes
from crossview.models.dense.classical import grey_image
from crossview.models.dense.dis_fusion import (
    FLOW_CENSUS_WINDOW,
    FLOW_SECOND_TIER_PX,
    _choice_cost,
    _chosen,
    _picked,
    polished,
)
from crossview.report import write_json

sys.path.insert(0, str(Path(__file__).parent))
sys.path.insert(1, str(Path(__file__).parents[1] / "real-stereo"))  # the stereo studies' helpers
from flow_census_choice import at_size, cached_row, choose, dis_runs, every_pair
from flow_census_init import large_motions, started_from
from flow_dis_fusion import epe
from real_choice import scene_groups

SAMPLES = 10_000  # known forward pixels per training pair
CAP = 20.0  # px: a candidate's error counts at most this much in the training loss
HIDDEN = 16
STEPS = 400
TIERS = (0.5, FLOW_SECOND_TIER_PX)
FEATURES = ("cost", "cost margin", "log error", "within 0.5", "within 2", "log size",
            "log from median", "log roughness", "texture", "network", "dis grey", "dis rank",
            "dis restart")


def features(candidates: Sequence[np.ndarray], costs: Sequence[tuple[np.ndarray, np.ndarray]],
             firsts: Sequence[np.ndarray]) -> np.ndarray:
    """``[C, 2, H, W, F]`` float32 features (:data:`FEATURES`) of the ``candidates`` (``[2, H,
    W, 2]`` each, in the fusion's order), their ``(cost, error)`` ``[2, H, W]``, each row's
    first frame ``[H, W, 3]``."""
    stack = np.stack(candidates)  # [C, 2, H, W, 2]
    cost = np.stack([c for c, _ in costs])
    error = np.stack([e for _, e in costs])
    median = np.median(stack, axis=0)
    texture = np.stack([_texture(frame) for frame in firsts])  # [2, H, W]
    out = []
    for index in range(len(candidates)):
        flow = stack[index]
        rough = np.stack([_roughness(f) for f in flow])
        onehot = [np.full(cost.shape[1:], float(index == k), np.float32) for k in range(4)]
        out.append(np.stack([cost[index] / 24, (cost[index] - cost.min(0)) / 24,
                             np.log1p(error[index]), (error[index] <= TIERS[0]) * 1.0,
                             (error[index] <= TIERS[1]) * 1.0,
                             np.log1p(np.linalg.norm(flow, axis=-1)),
                             np.log1p(np.linalg.norm(flow - median, axis=-1)),
                             np.log1p(rough), texture, *onehot], -1).astype(np.float32))
    return np.stack(out)


def _texture(frame: np.ndarray) -> np.ndarray:
    """The grey frame's gradient magnitude (levels / px) averaged over the census window."""
    grey = grey_image(frame).astype(np.float32)
    gx, gy = cv2.Sobel(grey, cv2.CV_32F, 1, 0) / 8, cv2.Sobel(grey, cv2.CV_32F, 0, 1) / 8
    window = (FLOW_CENSUS_WINDOW, FLOW_CENSUS_WINDOW)
    return np.log1p(cv2.blur(np.hypot(gx, gy), window, borderType=cv2.BORDER_REFLECT))


def _roughness(flow: np.ndarray) -> np.ndarray:
    """``[H, W]``: the flow's ``[H, W, 2]`` absolute differences to its right and lower
    neighbours, averaged over 3 x 3 px."""
    dx = np.abs(np.diff(flow, axis=1, append=flow[:, -1:])).sum(-1)
    dy = np.abs(np.diff(flow, axis=0, append=flow[-1:])).sum(-1)
    return cv2.blur(dx + dy, (3, 3))


class Scorer(nn.Module):
    """A candidate's score from its features ``[..., F]`` -> ``[...]``."""

    def __init__(self) -> None:
        super().__init__()
        self.net = nn.Sequential(nn.Linear(len(FEATURES), HIDDEN), nn.ReLU(),
                                 nn.Linear(HIDDEN, 1))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.net(x)[..., 0]


def candidates_of(data: dict) -> tuple[list, list, list, list]:
    """The first three candidates of a cached pair, their costs, the census codes and each
    row's first frame."""
    first, second = data["frame0"], data["frame1"]
    codes = [census_codes(first), census_codes(second)]
    three = [data["field"], *dis_runs(first, second)]
    return three, [_choice_cost(c, codes, FLOW_CENSUS_WINDOW) for c in three], codes, [first,
                                                                                      second]


def extract(cache: Path, out: Path, roots: list[str], part: tuple[int, int]) -> None:
    """Step 1 of the module docstring."""
    out.mkdir(parents=True, exist_ok=True)
    for index, (key, _, _, _, _, truth, known) in enumerate(every_pair(roots)):
        target = out / f"{key}.npz"
        if index % part[1] != part[0] or target.is_file():
            continue
        with np.load(cache / f"{key}.npz") as cached:
            data = dict(cached)
        three, costs, codes, firsts = candidates_of(data)
        restart = started_from(firsts[0], firsts[1], _chosen(three, costs, TIERS))
        four = [*three, restart]
        costs.append(_choice_cost(restart, codes, FLOW_CENSUS_WINDOW))
        shape = data["frame0"].shape[:2]
        small = at_size(np.nan_to_num(truth), shape)
        seen = cv2.resize(known.astype(np.uint8), shape[::-1],
                          interpolation=cv2.INTER_NEAREST).astype(bool)
        rows, cols = np.nonzero(seen)
        pick = np.random.default_rng(index).choice(len(rows), min(SAMPLES, len(rows)),
                                                   replace=False)
        rows, cols = rows[pick], cols[pick]
        feats = features(four, costs, firsts)[:, 0, rows, cols]  # [C, S, F]
        errors = np.stack([np.linalg.norm(c[0, rows, cols] - small[rows, cols], axis=-1)
                           for c in four])  # [C, S]
        np.savez(target, features=feats, errors=errors.astype(np.float32))
        print(key, feats.shape, flush=True)


def train(samples: Path, keys: list[str]) -> Scorer:
    """A scorer trained on the samples of ``keys`` (module docstring)."""
    torch.manual_seed(0)
    loaded = [np.load(samples / f"{key}.npz") for key in keys]
    x = torch.from_numpy(np.concatenate([d["features"] for d in loaded], 1))  # [C, N, F]
    y = torch.from_numpy(np.minimum(np.concatenate([d["errors"] for d in loaded], 1), CAP))
    scorer = Scorer()
    optimiser = torch.optim.Adam(scorer.parameters(), lr=1e-2)
    for _ in range(STEPS):
        weights = torch.softmax(scorer(x), 0)
        loss = (weights * y).sum(0).mean()
        optimiser.zero_grad()
        loss.backward()
        optimiser.step()
    print(f"trained on {len(keys)} pairs ({x.shape[1]} px): expected error {loss.item():.3f}"
          f" (oracle {y.min(0).values.mean().item():.3f})",
          flush=True)
    return scorer


def learned_choice(scorer: Scorer, candidates: list, costs: list, firsts: list) -> np.ndarray:
    """Per pixel the candidate of the highest score ``[2, H, W, 2]``."""
    with torch.no_grad():
        scores = scorer(torch.from_numpy(features(candidates, costs, firsts)))  # [C, 2, H, W]
    return _picked(candidates, scores.argmax(0).numpy())


def score_row(scorer: Scorer, data: dict, frame0: np.ndarray, frame1: np.ndarray,
              truth: np.ndarray, known: np.ndarray) -> dict:
    """A held-out pair's JSON row with ``scorer`` choosing."""
    three, costs, codes, firsts = candidates_of(data)
    restart = started_from(firsts[0], firsts[1], learned_choice(scorer, three, costs, firsts))
    four = [*three, restart]
    costs.append(_choice_cost(restart, codes, FLOW_CENSUS_WINDOW))
    flow = learned_choice(scorer, four, costs, firsts)[0]
    return {**cached_row(data, frame0, frame1, truth, known),
            "learned+": epe(at_size(polished(flow, *firsts), truth.shape[:2]), truth, known)}


def score(cache: Path, samples: Path, out: Path, roots: list[str],
          part: tuple[int, int]) -> None:
    """Step 2 of the module docstring (the ``part[0]``-th of every ``part[1]`` folds; the
    last fold is the scorer trained on every real-train pair)."""
    table = json.loads(out.read_text()) if out.is_file() else {}
    pairs = list(every_pair(roots))
    train_root = next(Path(r) for r in roots if "real-train" in r)
    groups = scene_groups(train_root)
    group_of = {key: groups[key.split("@")[0]] for key, root, *_ in pairs
                if "real-train" in str(root)}
    folds = [*sorted(set(group_of.values())), None]  # None: every real-train pair
    for fold_index, group in enumerate(folds):
        if fold_index % part[1] != part[0]:
            continue
        held = [p for p in pairs if (group_of.get(p[0]) == group if group is not None
                                     else p[0] not in group_of)]
        if all(p[0] in table for p in held):
            continue
        scorer = train(samples, [k for k, g in group_of.items() if g != group])
        for key, _, _, frame0, frame1, truth, known in held:
            with np.load(cache / f"{key}.npz") as cached:
                table[key] = score_row(scorer, dict(cached), frame0, frame1, truth, known)
            print(key, {k: round(v, 3) for k, v in table[key].items()
                        if isinstance(v, float)}, flush=True)
            write_json(out, table)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    steps = parser.add_subparsers(dest="step", required=True)
    step = steps.add_parser("extract")
    step.add_argument("cache", type=Path)
    step.add_argument("samples", type=Path)
    step.add_argument("roots", nargs="+")
    step.add_argument("--part", default="0/1")
    step = steps.add_parser("score")
    step.add_argument("cache", type=Path)
    step.add_argument("samples", type=Path)
    step.add_argument("out", type=Path)
    step.add_argument("roots", nargs="+")
    step.add_argument("--part", default="0/1")
    step = steps.add_parser("choose")
    step.add_argument("tables", type=Path, nargs="+")
    step.add_argument("train_root", type=Path)
    args = parser.parse_args()
    if args.step == "choose":
        choose(args.tables, args.train_root)
        large_motions(args.tables, ("learned",))
        return
    part = tuple(int(v) for v in args.part.split("/"))
    if args.step == "extract":
        extract(args.cache, args.samples, args.roots, part)
    else:
        score(args.cache, args.samples, args.out, args.roots, part)


if __name__ == "__main__":
    main()
