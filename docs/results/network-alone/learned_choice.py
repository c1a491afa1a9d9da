"""A learned choice between the fused default's value and the network's, per pixel
(network-alone item 27; issue 50 item 3: the network decides where a rule learned from real
scenes says it is right).

Item 1's oracle takes, per pixel, whichever of the fused default and the network's field (as the
fusion receives it) is right: dev 8.14 % against 9.43. Item 22 chose by the census cost alone
and lost. Here a small per-pixel classifier (an MLP :data:`FEATURES` -> :data:`HIDDEN` -> 1)
gives the probability that the network's value is the better one, from what the fusion knows
at the pixel: which step answered it (SGBM, the network, the fill), whether the network's views
agree, the length of SGBM's hole there, whether it lies in the out-of-view strip, the two
values' difference, each value's census cost over 9 px (both views' fields, as the flow fusion
scores) and the image's texture. It is trained to lower the expected bad-2 (the probability
times the network's error indicator plus its complement times the default's) on
:data:`SAMPLES` known pixels of each training scene's left view; the network's value is kept
where the probability exceeds 0.5.

Per recorded scene (``record.py``): leave-one-group-out over real-train's groups (a classifier
per fold trained on the other groups' scenes, fixed seed) scores each real-train scene held
out; the classifier trained on every real-train scene scores the development scenes. JSON
``{scene: {"default", "learned", "oracle", "network share"}}`` (bad-2 %, left view; the share
of known pixels given the network's value); means per root printed.

Run: ``OMP_NUM_THREADS=1 python docs/results/network-alone/learned_choice.py /tmp/fusion-rec
../shared/real-train docs/results/network-alone/learned_choice.json``
"""

from __future__ import annotations

import sys
from pathlib import Path

import cv2
import numpy as np
import torch
from torch import nn

from crossview.geometry.census_arrays import census_codes, census_cost
from crossview.models.dense.classical import grey_image, hole_run_length
from crossview.models.dense.sgbm_fusion import FILL, NETWORK, SGBM
from crossview.report import write_json

sys.path.insert(0, str(Path(__file__).parent))
sys.path.insert(1, str(Path(__file__).parents[1] / "real-stereo"))
from adapt_rate import scores
from real_choice import scene_groups

SAMPLES = 20_000  # known left-view pixels per training scene
HIDDEN = 16
STEPS = 400
WINDOW = 9  # px: the census cost's window
FEATURES = ("log difference", "network above", "SGBM", "network", "fill", "consistent",
            "log hole run", "out of view", "default cost", "network cost", "cost margin",
            "texture")


def features(d: dict) -> np.ndarray:
    """``[H, W, F]`` float32 features (:data:`FEATURES`) of a recorded scene's left view."""
    fused, network, sources = d["left_fused"], d["left_network"], d["left_sources"]
    codes = [census_codes(d["left_image"]), census_codes(d["right_image"])]

    def cost(left: np.ndarray, right: np.ndarray) -> np.ndarray:  # the left view's, bits / 24
        field = np.stack([np.stack([-left, np.zeros_like(left)], -1),
                          np.stack([right, np.zeros_like(right)], -1)]).astype(np.float32)
        return census_cost(codes, field, WINDOW)[0] / 24

    default_cost = cost(fused, d["right_fused"])
    network_cost = cost(network, d["right_network"])
    grey = grey_image(d["left_image"]).astype(np.float32)
    gradient = np.hypot(cv2.Sobel(grey, cv2.CV_32F, 1, 0), cv2.Sobel(grey, cv2.CV_32F, 0, 1)) / 8
    texture = np.log1p(cv2.blur(gradient, (WINDOW, WINDOW), borderType=cv2.BORDER_REFLECT))
    columns = np.arange(fused.shape[1], dtype=np.float32)[None]
    run = np.where(sources == SGBM, 0.0, hole_run_length(d["left_classical"]))
    return np.stack([np.log1p(np.abs(fused - network)), (network > fused) * 1.0,
                     (sources == SGBM) * 1.0, (sources == NETWORK) * 1.0,
                     (sources == FILL) * 1.0, d["left_consistent"] * 1.0, np.log1p(run),
                     (columns < fused) * 1.0, default_cost, network_cost,
                     network_cost - default_cost, texture], -1).astype(np.float32)


class Chooser(nn.Module):
    """The probability ``[...]`` that the network's value is the better one, from features
    ``[..., F]``."""

    def __init__(self) -> None:
        super().__init__()
        self.net = nn.Sequential(nn.Linear(len(FEATURES), HIDDEN), nn.ReLU(),
                                 nn.Linear(HIDDEN, 1))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.sigmoid(self.net(x)[..., 0])


def samples(d: dict, seed: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Features ``[S, F]`` and the default's and the network's bad-2 indicators ``[S]`` on
    :data:`SAMPLES` known pixels of a scene."""
    truth = d["truth"]
    known = np.isfinite(truth) & (truth > 0)
    rows, cols = np.nonzero(known)
    pick = np.random.default_rng(seed).choice(len(rows), min(SAMPLES, len(rows)),
                                              replace=False)
    rows, cols = rows[pick], cols[pick]
    x = features(d)[rows, cols]
    wrong = [(np.abs(d[key][rows, cols] - truth[rows, cols]) > 2).astype(np.float32)
             for key in ("left_fused", "left_network")]
    return x, *wrong


def train(scenes: list[tuple[np.ndarray, np.ndarray, np.ndarray]]) -> Chooser:
    """A chooser trained on the scenes' samples (module docstring)."""
    torch.manual_seed(0)
    x, default_wrong, network_wrong = (torch.from_numpy(np.concatenate(parts))
                                       for parts in zip(*scenes, strict=True))
    chooser = Chooser()
    optimiser = torch.optim.Adam(chooser.parameters(), lr=1e-2)
    for _ in range(STEPS):
        p = chooser(x)
        loss = (p * network_wrong + (1 - p) * default_wrong).mean()
        optimiser.zero_grad()
        loss.backward()
        optimiser.step()
    return chooser


def scene_row(chooser: Chooser, d: dict) -> dict[str, float]:
    """A scene's row: the default, the learned choice, the oracle (bad-2 % of the left view)
    and the share of known pixels given the network's value."""
    truth, fused, network = d["truth"], d["left_fused"], d["left_network"]
    with torch.no_grad():
        use = chooser(torch.from_numpy(features(d))).numpy() > 0.5
    known = np.isfinite(truth) & (truth > 0)
    nearer = np.abs(network - truth) < np.abs(fused - truth)
    return {"default": scores(fused, truth)[0],
            "learned": scores(np.where(use, network, fused), truth)[0],
            "oracle": scores(np.where(nearer, network, fused), truth)[0],
            "network share": float(100 * (use & known).sum() / known.sum())}


def main(records: Path, train_root: Path, out: Path) -> None:
    paths = sorted(records.glob("*.npz"))
    data = {p.stem: dict(np.load(p)) for p in paths}
    groups = scene_groups(train_root)
    train_keys = [k for k in data if k.startswith("real-train__")]
    group_of = {k: groups[k.split("__", 1)[1]] for k in train_keys}
    sampled = {k: samples(data[k], i) for i, k in enumerate(train_keys)}
    table: dict[str, dict[str, float]] = {}
    for group in [*sorted(set(group_of.values())), None]:  # None: every real-train scene
        chooser = train([sampled[k] for k in train_keys if group_of[k] != group])
        held = ([k for k in train_keys if group_of[k] == group] if group is not None
                else [k for k in data if k not in group_of])
        for key in held:
            table[key] = scene_row(chooser, data[key])
            print(key, {k: round(v, 2) for k, v in table[key].items()}, flush=True)
        write_json(out, table)
    for root in ("real-train", "real-dev"):
        keys = [k for k in table if k.startswith(f"{root}__")]
        print(root, len(keys), {s: round(float(np.mean([table[k][s] for k in keys])), 3)
                                for s in table[keys[0]]})


if __name__ == "__main__":
    if len(sys.argv) != 4:
        sys.exit(__doc__)
    main(Path(sys.argv[1]), Path(sys.argv[2]), Path(sys.argv[3]))
