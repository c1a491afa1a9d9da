"""Where the bundled stereo model's held-out error sits, measured on the synthetic benchmark.

For every held-out pair (``get_heldout("synthetic-stereo")``, 256 x 512) the disparity of
``crossview.estimate_disparity`` is compared with the ground truth, pooled over pixels:

- ``regions``: share of the valid pixels, EPE, bad-2 and contribution to the overall EPE of
  *non-occluded* pixels (``valid_noc``), *occluded in view* (the match is hidden in the right
  image) and *out of view* (``x - d < 0``: the match is left of the right image);
- ``by_disparity``: the same per band of the true disparity;
- ``pairs``: the per-pair EPE distribution and how much of the overall EPE the worst 5 % and
  10 % of pairs carry; ``worst``: the worst pairs' indices (to look at them).

Run: ``OMP_NUM_THREADS=1 python docs/results/stereo-breakdown/stereo_breakdown.py [PAIRS] [WEIGHTS]
[JSON]`` (defaults: 200 pairs; the bundled weights, also when WEIGHTS is empty;
``docs/results/stereo-breakdown/stereo_breakdown.json``).
"""

from __future__ import annotations

import itertools
import sys
from pathlib import Path

import numpy as np
import torch
from rich.progress import track

import crossview
from crossview.data.synthetic.heldout import get_heldout
from crossview.report import write_json

BANDS = (0.0, 16.0, 32.0, 64.0, 96.0, float("inf"))  # true disparity bands, pixels


class Pool:
    """Pixel counts, summed absolute errors and bad-2 counts of one subset of pixels."""

    def __init__(self) -> None:
        self.count, self.error, self.bad2 = 0, 0.0, 0

    def add(self, err: np.ndarray, mask: np.ndarray) -> None:
        self.count += int(mask.sum())
        self.error += float(err[mask].sum())
        self.bad2 += int((err[mask] > 2.0).sum())

    def summary(self, total: int) -> dict[str, float]:
        n = max(self.count, 1)
        return {"share_pct": 100 * self.count / total, "epe": self.error / n,
                "bad2_pct": 100 * self.bad2 / n, "epe_contribution": self.error / total}


def main(pairs: int, weights: str | None, out: Path) -> None:
    torch.set_num_threads(1)
    data = get_heldout("synthetic-stereo", length=pairs)
    model = crossview.load_model("matchstereo-mini", weights)
    regions = {name: Pool() for name in ("all", "noc", "occluded_in_view", "out_of_view")}
    bands = {f"{lo:g}-{hi:g}": Pool() for lo, hi in itertools.pairwise(BANDS)}
    per_pair: list[tuple[float, float, int]] = []  # (summed error, pixels, index)
    for i in track(range(pairs), description="pairs"):
        s = data[i]
        pred = crossview.estimate_disparity(s["image0"][None], s["image1"][None], model=model)
        disp = pred.disparity[0].numpy()
        gt, valid = s["disparity"].numpy(), s["valid"].numpy()
        noc = valid & s["valid_noc"].numpy()
        out_of_view = valid & (np.arange(gt.shape[1])[None, :] - gt < 0)
        err = np.abs(disp - gt)
        for name, mask in (("all", valid), ("noc", noc), ("out_of_view", out_of_view),
                           ("occluded_in_view", valid & ~noc & ~out_of_view)):
            regions[name].add(err, mask)
        for (lo, hi), pool in zip(itertools.pairwise(BANDS), bands.values(), strict=True):
            pool.add(err, valid & (gt >= lo) & (gt < hi))
        per_pair.append((float(err[valid].sum()), float(valid.sum()), i))
    total = regions["all"].count
    per_pair.sort(reverse=True)
    epes = np.array([e / max(n, 1) for e, n, _ in per_pair])

    def worst_share(fraction: float) -> float:
        k = max(1, round(fraction * pairs))
        return 100 * sum(e for e, _, _ in per_pair[:k]) / regions["all"].error

    report = {
        "weights": weights or "bundled matchstereo-mini", "pairs": pairs,
        "regions": {k: v.summary(total) for k, v in regions.items()},
        "by_disparity": {k: v.summary(total) for k, v in bands.items()},
        "pairs_epe": {"median": float(np.median(epes)), "p90": float(np.percentile(epes, 90)),
                      "max": float(epes.max()),
                      "worst_5pct_share_of_error_pct": worst_share(0.05),
                      "worst_10pct_share_of_error_pct": worst_share(0.10)},
        "worst": [{"index": i, "epe": e / n} for e, n, i in per_pair[:8]],
    }
    write_json(out, report)
    for name, row in {**report["regions"], **report["by_disparity"]}.items():
        print(f"{name:17s} share {row['share_pct']:5.1f} %  EPE {row['epe']:6.3f}  "
              f"bad-2 {row['bad2_pct']:6.2f} %  contributes {row['epe_contribution']:.3f} px")
    print("per-pair EPE:", {k: round(v, 3) for k, v in report["pairs_epe"].items()})


if __name__ == "__main__":
    args = sys.argv[1:]
    main(int(args[0]) if args else 200, args[1] if len(args) > 1 and args[1] else None,
         Path(args[2]) if len(args) > 2
         else Path("docs/results/stereo-breakdown/stereo_breakdown.json"))
