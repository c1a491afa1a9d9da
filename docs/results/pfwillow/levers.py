"""Levers for TransforMatcher on PF-WILLOW, each scored on PF-WILLOW and on the synthetic
held-out warps (the set that selects; PF-WILLOW only reports).

    PYTHONPATH=src python docs/results/pfwillow/levers.py --pfwillow ../shared/real-semantic \
        --levers refined raw refined-flip-tta --json docs/results/pfwillow/levers.json

A lever is a way to transfer keypoints, ``method(src [1, 3, Hs, Ws], tgt [1, 3, Ht, Wt],
points [N, 2]) -> [N, 2]`` target pixels (images 0..255). PF-WILLOW: PCK@0.05/0.1/0.15 with the
bbox-kp and bbox thresholds, mean over pairs (as ``crossview eval``). Synthetic: PCK@0.05/0.1
(``img`` threshold, pooled over keypoints) on warps of the held-out photographs (240 px, seed 0,
32 keypoints), as :func:`crossview.experiments.semantic_warps.evaluate_warps`.
"""

from __future__ import annotations

import argparse
import json
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np
import torch
from rich.progress import track

from crossview.data.datasets.pfwillow import PFWillow
from crossview.data.image_batch import sample_image
from crossview.data.synthetic.warp_batches import warp_batch, warp_dataset
from crossview.metrics.keypoints import pck, sample_pck
from crossview.models.transformatcher.backbone import LAYER_STAGES
from crossview.models.transformatcher.correlation import multilayer_correlation, resample_layers
from crossview.models.transformatcher.inference import (
    flip_tta_keypoints,
    load_transformatcher,
    transfer_keypoints,
)
from crossview.models.transformatcher.model import TransforMatcher

Method = Callable[[torch.Tensor, torch.Tensor, torch.Tensor], torch.Tensor]


def _with_blocks(blocks: tuple[int, ...] | None, grid: int = 15,
                 backbone: str = "efficientnet-lite0") -> TransforMatcher:
    """A model whose backbone taps ``blocks`` (None: its own) of ``backbone``, for the raw
    correlation only (the bundled refinement was trained on Lite0 blocks 5..15)."""
    model = TransforMatcher(backbone=backbone, grid=grid).eval()
    if blocks is not None:
        model.backbone.feature_blocks = blocks
    return model


class Lite2IntoLite0Head(TransforMatcher):
    """The bundled Lite0 refinement fed with the Lite2 correlation alone, resampled along depth
    to Lite0's layers (no training); ``transformatcher-lite0-lite2`` feeds it the mean of both."""

    def __init__(self) -> None:
        super().__init__(extra_backbone="efficientnet-lite2")
        self.load_trained_state_dict(load_transformatcher().head_state_dict())

    def correlation(self, src: torch.Tensor, tgt: torch.Tensor) -> torch.Tensor:
        feats = self.extra_backbone.features(torch.cat((src, tgt)))
        corr = multilayer_correlation([f[:1] for f in feats], [f[1:] for f in feats],
                                      (self.grid, self.grid))
        return resample_layers(corr, LAYER_STAGES["efficientnet-lite2"],
                               LAYER_STAGES["efficientnet-lite0"])


def levers() -> dict[str, Callable[[], Method]]:
    """Lever name -> a maker of its method (models are built only for the levers run)."""

    def refined(grid: int = 15) -> Method:
        model = load_transformatcher(grid=grid)
        return lambda s, t, p: transfer_keypoints(model, s, t, p)

    def raw(blocks: tuple[int, ...] | None = None, grid: int = 15,
            backbone: str = "efficientnet-lite0") -> Method:
        model = _with_blocks(blocks, grid, backbone)
        return lambda s, t, p: transfer_keypoints(model, s, t, p, "raw")

    def flip_tta(method: str) -> Method:
        model = load_transformatcher()
        return lambda s, t, p: flip_tta_keypoints(model, s, t, p, method)

    return {
        "refined": refined,
        "raw": raw,
        "refined-flip-tta": lambda: flip_tta("refined"),
        "raw-flip-tta": lambda: flip_tta("raw"),
        "refined-320": lambda: refined(20),
        "refined-lite2-into-lite0-head": lambda: (lambda m: lambda s, t, p: transfer_keypoints(
            m, s, t, p))(Lite2IntoLite0Head().eval()),
        "raw-lite0+lite2": lambda: (lambda m: lambda s, t, p: transfer_keypoints(
            m, s, t, p, "raw"))(load_transformatcher(extra_backbone="efficientnet-lite2")),
        "refined-lite0+lite2-into-lite0-head": lambda: (
            lambda m: lambda s, t, p: transfer_keypoints(m, s, t, p))(
            load_transformatcher(extra_backbone="efficientnet-lite2")),
        "raw-320": lambda: raw(grid=20),
        "raw-blocks-3-15": lambda: raw(tuple(range(3, 16))),
        "raw-blocks-8-15": lambda: raw(tuple(range(8, 16))),
        "raw-blocks-5-11": lambda: raw(tuple(range(5, 12))),
        "raw-lite1": lambda: raw(backbone="efficientnet-lite1"),
        "raw-lite2": lambda: raw(backbone="efficientnet-lite2"),
        "raw-lite2-blocks-4-20": lambda: raw(tuple(range(4, 21)), backbone="efficientnet-lite2"),
    }


def score_pfwillow(method: Method, root: str, every: int) -> dict[str, float]:
    """Mean PCK over PF-WILLOW pairs ``0, every, 2 * every, ...`` (each sub-class's 90 pairs are
    consecutive, so every sub-class keeps its share)."""
    data = PFWillow(root)
    names = [f"pck@{a:g}_{k}" for k in ("bbox-kp", "bbox") for a in (0.05, 0.1, 0.15)]
    values: dict[str, list[float]] = {name: [] for name in names}
    for i in track(range(0, len(data), every), description="PF-WILLOW", transient=True):
        sample = data[i]
        src, tgt = (sample_image(sample[k]) for k in ("image0", "image1"))
        with torch.inference_mode():
            pred = method(src, tgt, torch.from_numpy(sample["keypoints0"])).numpy()
        for name in names:
            alpha, kind = name[4:].split("_")
            values[name].append(sample_pck(pred, sample, float(alpha), kind).value)
    return {name: float(np.mean(v)) for name, v in values.items()}


def score_synthetic(method: Method, pairs: int) -> dict[str, float]:
    size = 240
    data = warp_dataset("heldout", size, pairs, 0, 32)
    hits: dict[float, list] = {0.05: [], 0.1: []}
    for i in track(range(pairs), description="synthetic", transient=True):
        b = warp_batch(data, [i])
        with torch.inference_mode():
            pred = method(b["src"], b["tgt"], b["kp_src"][0]).numpy()
        for alpha, scores in hits.items():
            scores.append(pck(pred, b["kp_tgt"][0].numpy(), None, alpha * size))
    return {f"pck@{alpha:g}_img": sum(s.total for s in scores) / sum(s.count for s in scores)
            for alpha, scores in hits.items()}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--pfwillow", required=True)
    parser.add_argument("--levers", nargs="+", default=["refined", "raw"])
    parser.add_argument("--pairs", type=int, default=48, help="synthetic held-out pairs")
    parser.add_argument("--every", type=int, default=1, help="score every N-th PF-WILLOW pair")
    parser.add_argument("--skip-pfwillow", action="store_true")
    parser.add_argument("--skip-synthetic", action="store_true")
    parser.add_argument("--json", type=Path, required=True)
    args = parser.parse_args()
    makers = levers()
    results = json.loads(args.json.read_text()) if args.json.exists() else {}
    for name in args.levers:
        method = makers[name]()
        name = name if args.every == 1 else f"{name} (every {args.every}th PF-WILLOW pair)"
        start = time.perf_counter()
        entry = dict(results.get(name, {}))
        if not args.skip_synthetic:
            entry["synthetic"] = score_synthetic(method, args.pairs)
            entry["synthetic_pairs"] = args.pairs
        if not args.skip_pfwillow:
            entry["pfwillow"] = score_pfwillow(method, args.pfwillow, args.every)
            entry["pfwillow_pairs"] = len(range(0, 900, args.every))
        entry["seconds"] = round(time.perf_counter() - start, 1)
        results[name] = entry
        print(name, json.dumps(entry), flush=True)
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps(results, indent=2))


if __name__ == "__main__":
    main()
