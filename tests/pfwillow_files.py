"""PF-WILLOW fixture trees in the rebuilt-folder layout (``pairs.csv``, ``keypoints.csv``,
``images/<subclass>/``), as ``../shared/real-semantic`` holds it."""

from __future__ import annotations

import csv
from pathlib import Path

import numpy as np

from crossview.data import io

# (subclass folder, subclass, category): two sub-classes of two categories
SUBCLASSES = (("car_G", "car(G)", "car"), ("duck_S", "duck(S)", "duck"))


def keypoint_text(points: np.ndarray) -> str:
    """``[10, 2]`` -> ``"x1;y1;...;x10;y10"`` with 4 decimals, as the CSVs write them."""
    return ";".join(f"{v:.4f}" for v in points.reshape(-1))


def write_pfwillow_folder(root: Path, rng: np.random.Generator, size: tuple[int, int] = (48, 64)
                          ) -> dict[str, np.ndarray]:
    """Two images per sub-class (one random image written twice, so a pair shows the same
    picture) and every ordered pair within a sub-class: 4 pairs. Keypoints are 1-based, as in
    the release. Returns ``{image path relative to root: its 1-based keypoints [10, 2]}``."""
    height, width = size
    points: dict[str, np.ndarray] = {}
    rows, pairs = [], []
    for folder, subclass, category in SUBCLASSES:
        image = rng.integers(0, 256, (height, width, 3), dtype=np.uint8)
        kps = np.stack([rng.uniform(9, width - 8, 10), rng.uniform(9, height - 8, 10)], 1)
        names = [f"images/{folder}/{category}_{i}.png" for i in (1, 2)]
        for name in names:
            (root / name).parent.mkdir(parents=True, exist_ok=True)
            io.write_image(root / name, image)
            points[name] = np.round(kps, 4)
            rows.append([name, category, subclass, width, height, keypoint_text(kps)])
        for src, tgt in ((names[0], names[1]), (names[1], names[0])):
            pairs.append([src, tgt, category, keypoint_text(points[src]),
                          keypoint_text(points[tgt]), subclass])
    for name, header, body in (
            ("keypoints.csv", ["image", "category", "subclass", "width", "height", "kps"], rows),
            ("pairs.csv", ["src_image", "trg_image", "category", "src_kps", "trg_kps",
                           "subclass"], pairs)):
        with (root / name).open("w", newline="") as file:
            writer = csv.writer(file)
            writer.writerow(header)
            writer.writerows(body)
    return points
