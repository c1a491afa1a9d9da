"""A first look (issue 50 item 5, not a choice): does stereo's mirrored second run (network-alone
item 15) help flow? Each of the first N stereo scenes of ROOT is read as a flow pair (left to
right moves by ``(-d, 0)``), and ``matchflow-hybrid`` runs on it and on both frames mirrored
left to right (not swapped: the mirrored flow is x-negated), alone (``fuse=False``) and as the
default (DIS fusion); per pixel the run whose forward and backward flows agree better is kept
(:func:`crossview.geometry.consistency_arrays.consistency_error`). Prints the forward flow's
EPE on the known pixels for the pair's run (``id``), the mirrored run and the choice, and the
means. The fused choice is taken after the fusion (the fusion is not rerun on it).

Run: ``OMP_NUM_THREADS=1 python docs/results/real-flow/flow_mirror_check.py ../shared/real-train 6``
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import torch

import crossview
from crossview.data.io import read_image
from crossview.geometry.consistency_arrays import consistency_error


def both_flows(model: torch.nn.Module, first: np.ndarray, second: np.ndarray,
               fuse: bool) -> np.ndarray:
    """Forward and backward flow ``[2, H, W, 2]`` float32 px of the pair."""
    result = crossview.estimate_flow(first, second, model=model, fuse=fuse)
    return np.stack([result.flow[0].permute(1, 2, 0).numpy(),
                     result.flow_backward[0].permute(1, 2, 0).numpy()]).astype(np.float32)


def main(root: Path, count: int) -> None:
    model = crossview.load_model("matchflow-hybrid")
    rows = []
    for scene in sorted(p.parent for p in root.glob("*/gt.npy"))[:count]:
        left, right = read_image(scene / "left.png"), read_image(scene / "right.png")
        truth = np.load(scene / "gt.npy")
        known = np.isfinite(truth) & (truth > 0)
        row = {}
        for fuse in (False, True):
            pair = both_flows(model, left, right, fuse)
            mirror = both_flows(model, np.ascontiguousarray(left[:, ::-1]),
                                np.ascontiguousarray(right[:, ::-1]), fuse)[:, :, ::-1].copy()
            mirror[..., 0] *= -1
            keep = consistency_error(pair)[0] <= consistency_error(mirror)[0]
            chosen = np.where(keep[..., None], pair, mirror)
            for name, flow in (("id", pair), ("mirror", mirror), ("consistent", chosen)):
                error = np.hypot(flow[0, ..., 0] + truth, flow[0, ..., 1])[known]
                row[f"{'fused' if fuse else 'alone'} {name}"] = float(error.mean())
        rows.append(row)
        print(scene.name, {k: round(v, 3) for k, v in row.items()}, flush=True)
    print("mean", {k: round(float(np.mean([r[k] for r in rows])), 3) for k in rows[0]})


if __name__ == "__main__":
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    main(Path(sys.argv[1]), int(sys.argv[2]))
