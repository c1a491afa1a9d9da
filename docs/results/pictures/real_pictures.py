"""Pictures of a stereo model on real scenes: left image, predicted disparity, error map.

    python docs/results/pictures/real_pictures.py /work/shared/real-dev \
        docs/images/real-dev-stereo.png \
        [--model matchstereo-hybrid] [--compare matchstereo-mini] [--sgbm-filled]

Rows: every stereo scene folder of the root (``left.*``, ``right.*``, ``gt.*``, read by the
scene-folder dataset) and the Middlebury 2014 Motorcycle pair that scikit-image ships. Error
maps show ``|d - gt|`` on known pixels (black where unknown), clipped at 4 px. Each panel's
bad-2 and EPE are also printed. ``--sgbm-filled`` adds the classical answer as the last
columns: OpenCV SGBM with its holes filled (:mod:`crossview.baselines`; the oracle range read
off the ground truth, as ``crossview eval`` runs it).
"""

from __future__ import annotations

import argparse

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt
import numpy as np
from skimage import data as skdata

import crossview
from crossview.baselines import fill_holes, sgbm_disparity, sgbm_num_disparities
from crossview.data.datasets.registry import open_dataset

SGBM_FILLED = "SGBM filled"


def scenes(root: str) -> list[tuple[str, np.ndarray, np.ndarray, np.ndarray]]:
    """``(name, left uint8 HxWx3, right, gt HxW with NaN unknown)`` for every scene."""
    dataset, _ = open_dataset(f"scenes:{root}", task="stereo")
    out = []
    for i in range(len(dataset)):
        s = dataset[i]
        gt = s["disparity"].astype(np.float64)
        gt[~s["valid"]] = np.nan
        out.append((s["name"], s["image0"], s["image1"], gt))
    left, right, disp = skdata.stereo_motorcycle()
    gt = disp.astype(np.float64)
    gt[~(np.isfinite(gt) & (gt > 0))] = np.nan
    out.append(("motorcycle (Middlebury 2014)", left, right, gt))
    return out


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("root")
    parser.add_argument("out")
    parser.add_argument("--model", default="matchstereo-hybrid")
    parser.add_argument("--compare", default=None)
    parser.add_argument("--sgbm-filled", action="store_true")
    args = parser.parse_args()
    models = ([args.model] + ([args.compare] if args.compare else [])
              + ([SGBM_FILLED] if args.sgbm_filled else []))
    loaded = {name: crossview.load_model(name) for name in models if name != SGBM_FILLED}
    rows = scenes(args.root)
    cols = 1 + 2 * len(models)
    fig, axes = plt.subplots(len(rows), cols, figsize=(3.2 * cols, 2.4 * len(rows)),
                             squeeze=False)
    for r, (name, left, right, gt) in enumerate(rows):
        known = np.isfinite(gt)
        axes[r, 0].imshow(left)
        axes[r, 0].set_title(name, fontsize=8)
        for m, model_name in enumerate(models):
            if model_name == SGBM_FILLED:
                search = sgbm_num_disparities(float(np.nanmax(gt)))
                disp = fill_holes(sgbm_disparity(left, right, search))
            else:
                disp = crossview.estimate_disparity(left, right,
                                                    model=loaded[model_name]).disparity[0].numpy()
            err = np.where(known, np.abs(disp - np.nan_to_num(gt)), np.nan)
            bad2 = 100 * np.mean(err[known] > 2)
            epe = np.mean(err[known])
            print(f"{name} | {model_name} | bad-2 {bad2:.2f} % | EPE {epe:.3f} px", flush=True)
            lo, hi = np.nanpercentile(gt, 1), np.nanpercentile(gt, 99)
            axes[r, 1 + 2 * m].imshow(disp, cmap="turbo", vmin=lo, vmax=hi)
            axes[r, 1 + 2 * m].set_title(f"{model_name}", fontsize=8)
            axes[r, 2 + 2 * m].imshow(np.nan_to_num(err, nan=0.0), cmap="magma", vmin=0, vmax=4)
            axes[r, 2 + 2 * m].set_title(f"error: bad-2 {bad2:.1f} %, EPE {epe:.2f} px",
                                         fontsize=8)
    for ax in axes.flat:
        ax.axis("off")
    fig.tight_layout()
    fig.savefig(args.out, dpi=80)
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
