"""The network alone with the fusion's own post-processing and no classical matcher (issue 50
item 2): does the colour-weighted median at depth edges, the out-of-view strip, or a row fill
of the network's own left-right inconsistent pixels make ``--no-fuse`` better on real scenes?

Every value these steps produce is one of the network's own (the median picks among them, the
fill copies one along the row, the strip continues them), so the network still decides, and
what runs without OpenCV's matchers (ONNX ``--bare``, a GPU) could run them too. The steps are
the fused default's steps 3-5 (:mod:`crossview.models.dense.sgbm_fusion`) with the network's
field in SGBM's place:

- ``alone``: the network alone (``crossview.estimate_disparity(..., fuse=False)``, its own
  settings: low-resolution initialisation and photometric refinement);
- ``medians``: the edge medians of the fusion
  (:data:`~crossview.models.dense.sgbm_fusion.EDGE_MEDIANS`) on it, with the left image;
- ``strip``: the out-of-view strip continued
  (:data:`~crossview.models.dense.sgbm_fusion.OUT_OF_VIEW`);
- ``medians+strip``: both, in the fusion's order;
- ``fill T``: the pixels whose left-right consistency error exceeds ``T`` px filled along the
  row with the farther of the nearest consistent values (Middlebury's rule, the fusion's
  step 3), then the medians and the strip.

Scores bad-2 (% of the known pixels off by more than 2 px) and EPE of the left view per
scene; the JSON's ``records`` are what ``docs/results/real-stereo/real_choice.py`` reads,
which prints the leave-one-group-out choice over real-train's groups.

Run: ``OMP_NUM_THREADS=2 python docs/results/network-alone/alone_postprocess.py OUT.json
../shared/real-train ../shared/real-dev`` then ``python docs/results/real-stereo/real_choice.py
OUT.json ../shared/real-train``
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import torch

import crossview
from crossview.api import disparity_fields
from crossview.data.io import read_image
from crossview.geometry.consistency import consistency_error
from crossview.geometry.edge_weighted_median import edge_weighted_median
from crossview.geometry.out_of_view import extend_out_of_view
from crossview.models.dense import sgbm_fusion
from crossview.models.dense.classical import fill_holes
from crossview.report import print_table, write_json

FILL_THRESHOLDS = (0.5, 1.0, 2.0, 4.0)  # px of left-right consistency error
SETTINGS = ("alone", "medians", "strip", "medians+strip",
            *(f"fill {t:g}" for t in FILL_THRESHOLDS))


def medianed(disparity: np.ndarray, image: np.ndarray) -> np.ndarray:
    """The fusion's edge-median passes on a left disparity ``[H, W]``."""
    for settings in sgbm_fusion.EDGE_MEDIANS:
        disparity = edge_weighted_median(disparity, image, **settings)
    return disparity


def strip(disparity: np.ndarray) -> np.ndarray:
    """The fusion's out-of-view strip of a left disparity ``[H, W]``."""
    return extend_out_of_view(disparity, **sgbm_fusion.OUT_OF_VIEW)


def variants(disparity: np.ndarray, error: np.ndarray, image: np.ndarray
             ) -> dict[str, np.ndarray]:
    """Every setting's left disparity ``[H, W]`` from the network's ``disparity``, its
    consistency ``error [H, W]`` px and the left ``image [H, W, 3]``."""
    out = {"alone": disparity, "medians": medianed(disparity, image), "strip": strip(disparity)}
    out["medians+strip"] = strip(out["medians"])
    for threshold in FILL_THRESHOLDS:
        filled = fill_holes(np.where(error <= threshold, disparity, np.nan))
        out[f"fill {threshold:g}"] = strip(medianed(filled, image))
    return out


def scores(disparity: np.ndarray, truth: np.ndarray) -> tuple[float, float]:
    """``(bad-2, EPE)``: the % of the known pixels of ``truth [H, W]`` (NaN or non-positive:
    unknown) off by more than 2 px, and their mean error in px."""
    known = np.isfinite(truth) & (truth > 0)
    errors = np.abs(disparity - truth)[known]
    return float(100 * (errors > 2.0).mean()), float(errors.mean())


def main(out: Path, roots: list[Path]) -> None:
    model = crossview.load_model("matchstereo-hybrid")
    records, table = [], []
    for root in roots:
        for scene in sorted(p for p in root.iterdir() if (p / "gt.npy").is_file()):
            left, right = read_image(scene / "left.png"), read_image(scene / "right.png")
            result = crossview.estimate_disparity(left, right, model=model, fuse=False)
            error = consistency_error(disparity_fields(result))[0][0].numpy()
            disparity = result.disparity[0].numpy()
            truth = np.load(scene / "gt.npy").astype(np.float32)
            row = {name: scores(d, truth) for name, d in variants(disparity, error, left).items()}
            for name, (bad, epe) in row.items():
                records.append({"root": str(root), "scene": scene.name, "setting": name,
                                "refine": True, "bad2": bad, "epe": epe})
            table.append((root.name, scene.name, *(row[s][0] for s in SETTINGS)))
            print(f"{scene.name}: " + ", ".join(f"{s} {row[s][0]:.2f}" for s in SETTINGS),
                  flush=True)
    for root in roots:
        inside = [r for r in records if r["root"] == str(root)]
        for metric in ("bad2", "epe"):
            table.append((root.name, f"**mean {metric}**", *(
                float(np.mean([r[metric] for r in inside if r["setting"] == s]))
                for s in SETTINGS)))
    print_table("bad-2 % of the left view, the network alone and its post-processing",
                ["root", "scene", *SETTINGS], table)
    write_json(out, {"settings": SETTINGS, "records": records})


if __name__ == "__main__":
    if len(sys.argv) < 3:
        sys.exit(__doc__)
    torch.set_grad_enabled(False)
    main(Path(sys.argv[1]), [Path(p) for p in sys.argv[2:]])
