"""Pseudo-labels for distilling the fused stereo default into its network (issue 50 item 2).

For every pair under each UNLABELLED root (``left.png``, ``right.png``, no ground truth) the
bundled ``matchstereo-hybrid`` runs its fused default (:func:`crossview.estimate_disparity`,
every setting its own) with ``save_right``; a left pixel keeps the fused disparity where its
match in the right view agrees within ``CHECK_PX`` (left-right consistency), NaN elsewhere.
Written as scene folders (``left.png``, ``right.png`` linked, ``gt.npy``) in OUT_DIR, the
layout of ``data.real_scenes``; each labelled scene of LABELLED roots (``gt.npy`` present) is
linked beside them unchanged, so that one folder holds ground truth and pseudo-labels.

Run: ``OMP_NUM_THREADS=2 python docs/results/network-alone/pseudo_labels.py OUT_DIR
--unlabelled ../shared/real-unlabelled --labelled ../shared/real-train``
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

import numpy as np
from PIL import Image

import crossview
from crossview.geometry.consistency import noc_mask
from crossview.geometry.disparity import field_to_disparity
from crossview.models.dense import inference

CHECK_PX = 1.0


def pseudo_label(model, left: Path, right: Path) -> tuple[np.ndarray, float]:
    """The fused default's left disparity ``[H, W]`` float32, NaN where its two views disagree
    by more than :data:`CHECK_PX`, and the share (%) of pixels kept."""
    images = [np.asarray(Image.open(path).convert("RGB")) for path in (left, right)]
    fields = inference.predict_fields(model, images[0], images[1], "stereo")
    keep = noc_mask(fields.field, CHECK_PX)[0].numpy()
    disparity = field_to_disparity(fields.field[:1])[0].numpy()
    labels = np.where(keep, disparity, np.nan).astype(np.float32)
    return labels, float(100 * keep.mean())


def link(source: Path, target: Path) -> None:
    """``target`` a symbolic link to ``source`` (absolute), unless it exists."""
    if not target.exists():
        target.symlink_to(source.resolve())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("out_dir", type=Path)
    parser.add_argument("--unlabelled", type=Path, action="append", default=[])
    parser.add_argument("--labelled", type=Path, action="append", default=[])
    args = parser.parse_args()
    model = crossview.load_model("matchstereo-hybrid")
    args.out_dir.mkdir(parents=True, exist_ok=True)
    for root in args.labelled:
        for scene in sorted(p for p in root.iterdir() if (p / "gt.npy").exists()):
            link(scene, args.out_dir / scene.name)
    for root in args.unlabelled:
        for scene in sorted(p for p in root.iterdir() if (p / "left.png").exists()):
            target = args.out_dir / f"pseudo_{scene.name}"
            if (target / "gt.npy").exists():
                continue
            start = time.perf_counter()
            labels, kept = pseudo_label(model, scene / "left.png", scene / "right.png")
            target.mkdir(exist_ok=True)
            for name in ("left.png", "right.png"):
                link(scene / name, target / name)
            np.save(target / "gt.npy", labels)
            print(f"{scene.name}: {kept:.1f} % kept ({time.perf_counter() - start:.1f} s)",
                  flush=True)


if __name__ == "__main__":
    main()
