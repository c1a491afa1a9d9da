"""A small learned refinement of the fused default (issue 50 item 3), cross-validated by group.

A dilated residual CNN (16 channels, 6 blocks of two 3x3 convolutions with dilations 1, 2, 4,
8, 16, 1; 29 k parameters) reads the left view's image, the fused disparity and, relative to
it, the network's, SGBM's (0 in its holes) and the filled disparity, SGBM's hole mask and the
network's consistency mask (the ``.npz`` files of ``record.py``), and adds a correction to the
fused disparity. Trained with a smooth L1 loss against the ground truth on random 160 x 160
crops (batch 4, AdamW, one-cycle schedule peaking at 2e-3). The real-train scenes' groups
(``group`` column of the root's README) are split into FOLDS folds; each fold's scenes are
scored with a refiner trained on the others' (bad-2 %, error > 2 px, before -> after), then one
refiner trained on all real-train scenes is scored on the development scenes.

Run: ``OMP_NUM_THREADS=2 python docs/results/network-alone/refiner.py RECORD_DIR
../shared/real-train/README.md STEPS FOLDS``
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

CROP, BATCH, PEAK_LR = 160, 4, 2e-3


def features(scene: dict[str, np.ndarray]) -> tuple[np.ndarray, np.ndarray]:
    """The refiner's input ``[9, H, W]`` and the fused disparity ``[H, W]`` of a left view."""
    fused = scene["left_fused"]
    classical = scene["left_classical"]
    hole = ~np.isfinite(classical)
    relative = lambda d: np.clip(d - fused, -16, 16)[None] / 8.0  # noqa: E731
    channels = [scene["left_image"].astype(np.float32).transpose(2, 0, 1) / 255.0 - 0.5,
                relative(scene["left_network"]),
                np.where(hole, 0.0, relative(np.where(hole, fused, classical))),
                relative(scene["left_filled"]), hole[None].astype(np.float32),
                scene["left_consistent"][None].astype(np.float32), fused[None] / 64.0]
    return np.concatenate(channels).astype(np.float32), fused.astype(np.float32)


class Refiner(nn.Module):
    """Adds ``8 * CNN(x)`` to the fused disparity: ``x [B, 9, H, W]``, ``fused [B, H, W]``."""

    def __init__(self, channels: int = 16, dilations: tuple[int, ...] = (1, 2, 4, 8, 16, 1)):
        super().__init__()
        self.first = nn.Conv2d(9, channels, 3, padding=1)
        self.blocks = nn.ModuleList(
            nn.Sequential(nn.Conv2d(channels, channels, 3, padding=d, dilation=d),
                          nn.LeakyReLU(0.2),
                          nn.Conv2d(channels, channels, 3, padding=d, dilation=d))
            for d in dilations)
        self.last = nn.Conv2d(channels, 1, 3, padding=1)
        nn.init.zeros_(self.last.weight)
        nn.init.zeros_(self.last.bias)

    def forward(self, x: torch.Tensor, fused: torch.Tensor) -> torch.Tensor:
        h = F.leaky_relu(self.first(x), 0.2)
        for block in self.blocks:
            h = F.leaky_relu(h + block(h), 0.2)
        return fused + 8.0 * self.last(h)[:, 0]


def train(scenes: list[dict[str, np.ndarray]], steps: int, seed: int) -> Refiner:
    """A refiner trained ``steps`` steps on random crops of ``scenes``."""
    rng = np.random.default_rng(seed)
    torch.manual_seed(seed)
    data = [(*map(torch.from_numpy, features(s)), torch.from_numpy(s["truth"])) for s in scenes]
    model = Refiner()
    optimiser = torch.optim.AdamW(model.parameters(), PEAK_LR, weight_decay=1e-4)
    schedule = torch.optim.lr_scheduler.OneCycleLR(optimiser, PEAK_LR, total_steps=steps,
                                                   pct_start=0.1)
    for _ in range(steps):
        crops = []
        for _ in range(BATCH):
            x, fused, truth = data[rng.integers(len(data))]
            y0 = rng.integers(fused.shape[0] - CROP + 1)
            x0 = rng.integers(fused.shape[1] - CROP + 1)
            window = (slice(y0, y0 + CROP), slice(x0, x0 + CROP))
            crops.append((x[(slice(None), *window)], fused[window], truth[window]))
        x, fused, truth = (torch.stack(parts) for parts in zip(*crops, strict=True))
        known = torch.isfinite(truth)
        loss = F.smooth_l1_loss(model(x, fused)[known], truth[known])
        optimiser.zero_grad()
        loss.backward()
        optimiser.step()
        schedule.step()
    return model


@torch.no_grad()
def refined(model: Refiner, scene: dict[str, np.ndarray]) -> np.ndarray:
    x, fused = features(scene)
    return model(torch.from_numpy(x)[None], torch.from_numpy(fused)[None])[0].numpy()


def bad2(disparity: np.ndarray, truth: np.ndarray) -> float:
    known = np.isfinite(truth)
    return float(100 * (np.abs(disparity - truth)[known] > 2).mean())


def main(record_dir: Path, readme: Path, steps: int, folds: int) -> None:
    groups = dict(re.findall(r"^\| `([a-z0-9_]+)` \| ([a-z0-9_]+) \|", readme.read_text(), re.M))
    load = lambda path: dict(np.load(path))  # noqa: E731
    scenes = lambda root: {p.stem.split("__")[1]: load(p)  # noqa: E731
                           for p in sorted(record_dir.glob(f"{root}__*"))}
    train_scenes, dev_scenes = scenes("real-train"), scenes("real-dev")
    names = sorted({groups[s] for s in train_scenes})
    scores = {}
    for fold in range(folds):
        held = set(names[fold::folds])
        model = train([s for n, s in train_scenes.items() if groups[n] not in held], steps, fold)
        for name, scene in train_scenes.items():
            if groups[name] in held:
                scores[name] = (bad2(scene["left_fused"], scene["truth"]),
                                bad2(refined(model, scene), scene["truth"]))
                print(f"fold {fold} {name}: {scores[name][0]:.2f} -> {scores[name][1]:.2f}",
                      flush=True)
    model = train(list(train_scenes.values()), steps, folds)
    for name, scene in dev_scenes.items():
        print(f"dev {name}: {bad2(scene['left_fused'], scene['truth']):.2f} -> "
              f"{bad2(refined(model, scene), scene['truth']):.2f}", flush=True)


if __name__ == "__main__":
    if len(sys.argv) != 5:
        sys.exit(__doc__)
    main(Path(sys.argv[1]), Path(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4]))
