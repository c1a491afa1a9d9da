"""The pilots that chose the depth study's token size and budget (README, "How the setting
was chosen"): one conditioning, one seed, a plain training loop on the study's cached scenes.

    OMP_NUM_THREADS=1 python docs/results/camera-depth/pilots.py NAME CONDITIONING STEPS \
        PATCH STEM SCENES_CACHE_DIR [--train-scenes N]

``PATCH`` is the token size (8: 16 tokens per 32x32 view, 4: 64); ``STEM`` > 0 puts two 3x3
convolutions of ``STEM`` channels (GELU) before the patch embedding, their features
concatenated to the pixels. AdamW, lr 2e-3, weight decay 0.05, batch 16, linear warm-up over
a tenth of the steps then cosine decay, gradient clip 1, seed 0: the study's recipe without
the trainer's checkpoints. Prints the training loss five times, then one JSON line: CPU
seconds, the mean training loss of the last 100 steps and the held-out AbsRel of view 0 in
the study's four settings (pooled over pixels, as the study scores them).
"""

from __future__ import annotations

import argparse
import json
import math
import time
from pathlib import Path

import torch
from torch import Tensor, nn

from crossview.experiments.camera_depth import DepthStudyConfig, load_data, test_cases
from crossview.models.multiview.depth import MultiViewDepth
from crossview.models.multiview.model import MultiViewConfig, patchify, unpatchify
from crossview.train.recipes.multiview_depth import ShuffledViews

BATCH = 16


class StemEmbedding(nn.Module):
    """Patch embedding with a convolutional stem: tokens ``[B, V*h*w, p*p*C]`` (pixels first,
    then any ray channels) -> ``[B, V*h*w, width]``, the stem's features concatenated after
    each pixel's colour."""

    def __init__(self, config: MultiViewConfig, channels: int, stem: int) -> None:
        super().__init__()
        self.config = config
        self.conv = nn.Sequential(nn.Conv2d(3, stem, 3, padding=1), nn.GELU(),
                                  nn.Conv2d(stem, stem, 3, padding=1), nn.GELU())
        self.linear = nn.Linear(config.patch ** 2 * (channels + stem), config.width)

    def forward(self, tokens: Tensor) -> Tensor:
        config = self.config
        views = tokens.shape[1] // (config.grid[0] * config.grid[1])
        maps = unpatchify(tokens, views, config.image_size, config.patch)  # [B, V, H, W, C]
        pixels = maps[..., :3].permute(0, 1, 4, 2, 3).flatten(0, 1)
        features = self.conv(pixels).unflatten(0, maps.shape[:2]).permute(0, 1, 3, 4, 2)
        stacked = torch.cat([maps[..., :3], features, maps[..., 3:]], dim=-1)
        return self.linear(patchify(stacked, config.patch))


def build(conditioning: str, patch: int, stem: int) -> MultiViewDepth:
    model = MultiViewDepth(MultiViewConfig(conditioning=conditioning, patch=patch))
    if stem:
        channels = model.embed.in_features // patch ** 2
        model.embed = StemEmbedding(model.config, channels, stem)
    return model


def held_out_abs_rel(model: nn.Module, config: DepthStudyConfig, test: dict) -> dict[str, float]:
    model.eval()
    out = {}
    with torch.no_grad():
        for setting, scenes in test_cases(test, config).items():
            errors = []
            for start in range(0, len(scenes), 25):
                batch = [scenes[i] for i in range(start, min(start + 25, len(scenes)))]
                b = {key: torch.stack([s[key] for s in batch]) for key in batch[0]}
                depth = model(b["images"], b["K"], b["viewmats"])[:, 0]
                truth, valid = b["depth"][:, 0], b["valid"][:, 0]
                errors.append(((depth - truth).abs() / truth.clamp_min(1e-6))[valid])
            out[setting] = round(torch.cat(errors).mean().item(), 4)
    model.train()
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("name")
    parser.add_argument("conditioning")
    parser.add_argument("steps", type=int)
    parser.add_argument("patch", type=int)
    parser.add_argument("stem", type=int)
    parser.add_argument("cache_dir", type=Path)
    parser.add_argument("--train-scenes", type=int, default=10000)
    args = parser.parse_args()
    config = DepthStudyConfig(train_scenes=args.train_scenes)
    data = load_data(config, args.cache_dir)
    torch.manual_seed(0)
    model = build(args.conditioning, args.patch, args.stem)
    optimizer = torch.optim.AdamW(model.parameters(), lr=2e-3, weight_decay=0.05)
    warmup = args.steps // 10

    def factor(step: int) -> float:
        if step < warmup:
            return (step + 1) / warmup
        return 0.5 * (1 + math.cos(math.pi * (step - warmup) / (args.steps - warmup)))

    schedule = torch.optim.lr_scheduler.LambdaLR(optimizer, factor)
    train = ShuffledViews(data["train"], args.steps * BATCH, 0)
    started, losses = time.process_time(), []
    for step in range(args.steps):
        samples = [train[step * BATCH + j] for j in range(BATCH)]
        b = {key: torch.stack([s[key] for s in samples]) for key in samples[0]}
        depth = model(b["images"], b["K"], b["viewmats"])
        loss = (depth.log() - b["depth"].clamp_min(1e-6).log()).abs()[b["valid"]].mean()
        optimizer.zero_grad()
        loss.backward()
        nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        optimizer.step()
        schedule.step()
        losses.append(loss.item())
        if (step + 1) % (args.steps // 5) == 0:
            print(args.name, step + 1, round(sum(losses[-100:]) / len(losses[-100:]), 4),
                  round(time.process_time() - started, 1), flush=True)
    print(json.dumps({
        "name": args.name, "conditioning": args.conditioning, "steps": args.steps,
        "patch": args.patch, "stem": args.stem, "train_scenes": args.train_scenes,
        "cpu_s": round(time.process_time() - started, 1),
        "train_loss": round(sum(losses[-100:]) / 100, 4),
        "test": held_out_abs_rel(model, config, data["test"])}))


if __name__ == "__main__":
    main()
