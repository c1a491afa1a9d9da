"""Where the default stereo model's errors arise, scale by scale, on real scenes.

For every stereo scene under ROOT the network (no refinement) runs once on the padded pair and
the left view's field is read at each stage of the decoder: the initial correlation (1/32), the
end of each scale (1/32, 1/16, 1/8, 1/4) and the full-resolution output. Each stage is scored
against the ground truth sampled at the stage's token centres (nearest pixel), in full-resolution
pixels: EPE and the share of known pixels off by more than one token of that stage
(32, 16, 8, 4 px; 2 px at full resolution). A MatchAttention window at the next scale reaches
about one token of the current one around the field, so a pixel off by more than a token at one
stage is one the finer stages cannot pull back. ``--figure`` draws each stage's disparity and
error for one scene.

Run: ``OMP_NUM_THREADS=2 python docs/results/real-stereo/coarse_fields.py ROOT [WEIGHTS|bundled]
[--json OUT] [--figure SCENE PNG]``
"""

from __future__ import annotations

import argparse
from pathlib import Path

import numpy as np
import torch
import torch.nn.functional as F

import crossview
from crossview.data.datasets.scenes import SceneFolders
from crossview.report import print_table, write_json


def stages(model: torch.nn.Module, left: np.ndarray, right: np.ndarray
           ) -> list[tuple[str, int, np.ndarray]]:
    """``(name, pixels per token, left disparity [h, w] in full-resolution px)`` per stage,
    cropped to the image (padding: top rows and right columns, as the api pads)."""
    h, w = left.shape[:2]
    ph, pw = -(-h // 32) * 32, -(-w // 32) * 32

    def tensor(image: np.ndarray) -> torch.Tensor:
        x = torch.from_numpy(image.astype(np.float32)).permute(2, 0, 1)[None]
        return F.pad(x, (0, pw - w, ph - h, 0), mode="replicate")

    with torch.inference_mode():
        out = model.forward_fields(tensor(left), tensor(right), task="stereo")
    picked = [("init 1/32", 32, out["init_field"])]
    kinds, fields = out["field_kinds"], out["fields"]
    ends = [i for i in range(len(kinds)) if i + 1 == len(kinds) or kinds[i + 1] == "up"]
    for i, end in enumerate(ends):
        factor = 32 >> i
        picked.append((f"end 1/{factor}", factor, fields[end]))
    picked.append(("full", 1, out["field"]))
    result = []
    for name, factor, field in picked:
        disparity = (-field[0, ..., 0]).clamp(min=0).numpy() * factor
        top = (ph - h) // factor  # padded rows at the top
        result.append((name, factor, disparity[top:top + -(-h // factor), :-(-w // factor)]))
    return result


def score(disparity: np.ndarray, factor: int, truth: np.ndarray, valid: np.ndarray
          ) -> dict[str, float]:
    """EPE (px) and % off by more than a token (``max(factor, 2)`` px) over the known pixels
    at the stage's token centres."""
    h, w = truth.shape
    ys = np.minimum((np.arange(disparity.shape[0]) + 0.5) * factor, h - 1).astype(int)
    xs = np.minimum((np.arange(disparity.shape[1]) + 0.5) * factor, w - 1).astype(int)
    t, v = truth[np.ix_(ys, xs)], valid[np.ix_(ys, xs)]
    error = np.abs(disparity - t)[v]
    return {"epe": float(error.mean()), "off_pct": float(100 * np.mean(error > max(factor, 2)))}


def figure(rows: list[tuple[str, int, np.ndarray]], truth: np.ndarray, valid: np.ndarray,
           path: Path, title: str) -> None:
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    top = float(np.nanmax(np.where(valid, truth, np.nan)))
    fig, axes = plt.subplots(2, len(rows) + 1, figsize=(3 * (len(rows) + 1), 5.2))
    axes[0, 0].imshow(np.where(valid, truth, np.nan), cmap="turbo", vmin=0, vmax=top)
    axes[0, 0].set_title("ground truth")
    axes[1, 0].axis("off")
    for col, (name, factor, disparity) in enumerate(rows, start=1):
        up = np.kron(disparity, np.ones((factor, factor)))[:truth.shape[0], :truth.shape[1]]
        axes[0, col].imshow(up, cmap="turbo", vmin=0, vmax=top)
        axes[0, col].set_title(name)
        axes[1, col].imshow(np.where(valid, np.abs(up - truth), np.nan), cmap="magma", vmin=0,
                            vmax=32)
        axes[1, col].set_title("|error| (0-32 px)")
    for ax in axes.flat:
        ax.set_xticks([])
        ax.set_yticks([])
    fig.suptitle(title)
    fig.tight_layout()
    fig.savefig(path, dpi=80)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("root")
    parser.add_argument("weights", nargs="?", default="bundled")
    parser.add_argument("--json", type=Path)
    parser.add_argument("--figure", nargs=2, metavar=("SCENE", "PNG"))
    args = parser.parse_args()
    model = crossview.load_model("matchstereo-hybrid",
                                 None if args.weights == "bundled" else args.weights).eval()
    scenes = SceneFolders(args.root, task="stereo")
    table: dict[str, dict[str, dict[str, float]]] = {}
    for index, name in enumerate(scenes.names()):
        sample = scenes[index]
        rows = stages(model, sample["image0"], sample["image1"])
        table[name] = {stage: score(d, f, sample["disparity"], sample["valid"])
                       for stage, f, d in rows}
        if args.figure and args.figure[0] == name:
            figure(rows, sample["disparity"], sample["valid"], Path(args.figure[1]),
                   f"{name}: {args.weights}")
    names = list(next(iter(table.values())))
    print_table("% of known pixels off by more than a token of the stage (EPE px)",
                ["scene", *names],
                [(scene, *(f"{v[s]['off_pct']:.1f} ({v[s]['epe']:.1f})" for s in names))
                 for scene, v in table.items()])
    if args.json:
        write_json(args.json, {"weights": args.weights, "root": args.root, "stages": table})


if __name__ == "__main__":
    main()
