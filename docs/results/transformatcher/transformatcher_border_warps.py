"""Where the warp streams put their keypoints: near the sides or inside, and how far they move.

For the held-out set of ``semantic evaluate`` (seed 0, 96 pairs, 32 keypoints a pair) and the
training streams of the placement / backbone experiments (seeds 7 and 8, the first 1200 samples
= 600 steps of batch 2, 128 keypoints a pair), with and without ``WarpConfig.shift``: the
fraction of source keypoints within 48 px of a side (*border*, the split of
``transformatcher_borders.py``), the true displacement length of border and inside keypoints
(mean, median, 90th percentile), and the share of keypoints per displacement band, split into
border and inside (shares of all keypoints of the stream, so the eight cells sum to 100).
Numpy statistics of the generated samples only; no model.

Run: ``OMP_NUM_THREADS=1 python docs/results/transformatcher/transformatcher_border_warps.py [SHIFT
...]`` (default shifts 0.05 0.1 0.15; writes
``docs/results/transformatcher/transformatcher_border_warps.json``, about a minute).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np

from crossview.data.synthetic.warp_batches import warp_dataset

SIZE = 240
BORDER_PX = 48
BANDS = ((0, 10), (10, 20), (20, 30), (30, 50), (50, 1e9))


def keypoints(split: str, seed: int, pairs: int, count: int,
              shift: float = 0.0) -> tuple[np.ndarray, np.ndarray]:
    """Source keypoints and true displacements ``[pairs * count, 2]`` of a warp stream."""
    data = warp_dataset(split, SIZE, pairs, seed, count, shift)
    kp, disp = [], []
    for i in range(pairs):
        s = data[i]
        kp.append(s["keypoints0"].numpy())
        disp.append(s["keypoints1"].numpy() - s["keypoints0"].numpy())
    return np.concatenate(kp), np.concatenate(disp)


def statistics(kp: np.ndarray, disp: np.ndarray) -> dict:
    """Border fraction, displacement summaries and band shares (percent) of one stream."""
    border = (kp.min(-1) < BORDER_PX) | (kp.max(-1) > SIZE - 1 - BORDER_PX)
    length = np.linalg.norm(disp, axis=-1)
    out: dict = {"keypoints": len(kp), "border_fraction": round(float(border.mean()), 3)}
    for where, mask in (("border", border), ("inside", ~border)):
        d = length[mask]
        out[f"{where}_displacement_px"] = {"mean": round(float(d.mean()), 2),
                                           "median": round(float(np.median(d)), 2),
                                           "p90": round(float(np.percentile(d, 90)), 2)}
    out["share_percent"] = {
        f"{lo:g}-{hi:g} px" if hi < 1e9 else f">={lo:g} px": {
            where: round(100 * float((mask & (length >= lo) & (length < hi)).mean()), 2)
            for where, mask in (("border", border), ("inside", ~border))}
        for lo, hi in BANDS}
    out["border_at_least_20px_percent"] = round(100 * float((border & (length >= 20)).mean()), 2)
    return out


def main(shifts: list[float]) -> dict:
    report = {"border_px": BORDER_PX, "size": SIZE,
              "heldout (seed 0, 96 pairs x 32)": statistics(*keypoints("heldout", 0, 96, 32))}
    for seed in (7, 8):
        report[f"train seed {seed} (1200 pairs x 128)"] = statistics(
            *keypoints("train", seed, 1200, 128))
    for shift in shifts:
        report[f"train seed 7, shift {shift:g} (1200 pairs x 128)"] = statistics(
            *keypoints("train", 7, 1200, 128, shift))
    return report


if __name__ == "__main__":
    result = main([float(a) for a in sys.argv[1:]] or [0.05, 0.1, 0.15])
    path = Path(__file__).with_name("transformatcher_border_warps.json")
    path.write_text(json.dumps(result, indent=1) + "\n")
    for name, stats in result.items():
        if isinstance(stats, dict):
            print(f"{name}: border {stats['border_fraction']:.3f}, displacement border "
                  f"{stats['border_displacement_px']} inside {stats['inside_displacement_px']}, "
                  f"border >= 20 px {stats['border_at_least_20px_percent']} %")
    print(f"wrote {path}")
