"""The network's shape in SGBM's holes: the fusion's row fill against fills that follow the
network's disparity, anchored to SGBM at the hole's border (issue 50 item 3).

The row fill (step 3 of :mod:`crossview.models.dense.sgbm_fusion`) gives every pixel of a hole
the farther of the two SGBM values that end it along the row: a constant, whatever the surface
does inside. The network answers there too, smoothly but with its own bias. An *anchored* fill
keeps the network's shape and SGBM's level: a hole pixel ``p`` whose row fill came from the
border pixel ``b`` takes ``net(p) - net(b) + sgbm(b)``. If that measures better, the network
decides every hole pixel, and a user's fine-tuning or ``--adapt`` reaches the answer.

Reads the ``.npz`` files of ``record.py`` (the fusion's inputs per real scene, both views) and
replays each view's fusion (:func:`crossview.models.dense.sgbm_fusion.fusion_steps`, medians and
out-of-view strip included) with the holes filled by each setting; the ``row`` setting is
checked to equal the recorded default bit for bit. Settings:

- ``row``: the shipped row fill;
- ``anchored``: every hole pixel anchored (the network's pixels of step 2 as they are);
- ``anchored-consistent``: anchored where the network's two views agree, else the row fill;
- ``anchored-behind``: anchored, but never nearer than the nearer of the two border values
  (an occlusion lies behind what hides it);
- ``anchored-behind-consistent``: both limits.

Scores bad-2 (% of the known pixels off by more than 2 px) of the left view per scene; the
JSON's ``records`` are what ``docs/results/real-stereo/real_choice.py`` reads, which prints the
leave-one-group-out choice over real-train's groups.

Run: ``python docs/results/network-alone/guided_fill.py RECORD_DIR OUT.json`` then
``python docs/results/real-stereo/real_choice.py OUT.json ../shared/real-train``
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np

from crossview.models.dense import sgbm_fusion
from crossview.models.dense.classical import nearest_valid_columns
from crossview.report import print_table, write_json

SETTINGS = ("row", "anchored", "anchored-consistent", "anchored-behind",
            "anchored-behind-consistent")
ROOTS = {"real-dev": "../shared/real-dev", "real-train": "../shared/real-train"}


def anchored_fill(sparse: np.ndarray, network: np.ndarray, consistent: np.ndarray, *,
                  behind: bool, only_consistent: bool) -> np.ndarray:
    """``sparse [H, W]`` (NaN at holes) with its holes filled: the row fill's border pixel
    ``b`` (the farther of the nearest known pixels left and right) carries SGBM's level,
    ``network [H, W]`` the shape: ``net(p) - net(b) + sparse(b)``; with ``behind`` at most
    the nearer border value; with ``only_consistent`` the row fill's value where
    ``consistent [H, W]`` is False. Rows without a known pixel become 0 (as the row fill)."""
    h, w = sparse.shape
    before, after = nearest_valid_columns(sparse)
    rows = np.arange(h)[:, None]
    padded = np.concatenate([np.where(np.isfinite(sparse), sparse, np.inf),
                             np.full((h, 1), np.inf)], axis=1)
    left = padded[rows, np.where(before >= 0, before, w)]
    right = padded[rows, after]
    border = np.where(left <= right, np.where(before >= 0, before, w), after)
    level = np.minimum(left, right)  # the row fill's value
    known = np.isfinite(level)
    net_border = np.concatenate([network, np.zeros((h, 1), network.dtype)], axis=1)[rows, border]
    anchored = network - net_border + level
    if behind:
        nearer = np.maximum(np.where(np.isfinite(left), left, -np.inf),
                            np.where(np.isfinite(right), right, -np.inf))
        anchored = np.minimum(anchored, nearer)
    anchored = np.maximum(anchored, 0.0)
    if only_consistent:
        anchored = np.where(consistent, anchored, level)
    filled = np.where(np.isfinite(sparse), sparse, np.where(known, anchored, 0.0))
    return filled.astype(np.float32)


def fused_with(setting: str, z: np.lib.npyio.NpzFile, view: str) -> np.ndarray:
    """One view's fused disparity ``[H, W]`` with its holes filled by ``setting``: the fill
    handed to the fusion as SGBM's answer, so that steps 4 and 5 run on it as shipped."""
    network, consistent, classical, image = (z[f"{view}_{k}"] for k in
                                             ("network", "consistent", "classical", "image"))
    if setting == "row":
        return sgbm_fusion.fuse_view(network, consistent, classical, image, view)
    sources = sgbm_fusion.fusion_sources(network, consistent, classical)
    sparse = np.where(sources == sgbm_fusion.SGBM, classical,
                      np.where(sources == sgbm_fusion.NETWORK, network, np.nan))
    filled = anchored_fill(sparse, network, consistent, behind="behind" in setting,
                           only_consistent=setting.endswith("consistent"))
    return sgbm_fusion.fuse_view(network, consistent, filled, image, view)


def bad2(disparity: np.ndarray, truth: np.ndarray) -> float:
    """% of the known pixels of ``truth [H, W]`` (NaN unknown) off by more than 2 px."""
    known = np.isfinite(truth)
    return float(100 * (np.abs(disparity - truth)[known] > 2.0).mean())


def main(record_dir: Path, out: Path) -> None:
    records, table = [], []
    for path in sorted(record_dir.glob("*.npz")):
        root_name, scene = path.stem.split("__")
        z = np.load(path)
        row = {}
        for setting in SETTINGS:
            left = fused_with(setting, z, "left")
            if setting == "row" and not np.array_equal(left, z["left_fused"]):
                raise RuntimeError(f"{scene}: the replayed row fill is not the recorded default")
            row[setting] = bad2(left, z["truth"])
            records.append({"root": ROOTS[root_name], "scene": scene, "setting": setting,
                            "refine": True, "bad2": row[setting]})
        table.append((root_name, scene, *(row[s] for s in SETTINGS)))
        print(f"{scene}: " + ", ".join(f"{s} {row[s]:.2f}" for s in SETTINGS), flush=True)
    for root_name in ROOTS:
        inside = [r for r in table if r[0] == root_name]
        table.append((root_name, "**mean**",
                      *(float(np.mean([r[2 + i] for r in inside])) for i in range(len(SETTINGS)))))
    print_table("bad-2 % of the left view, per hole fill", ["root", "scene", *SETTINGS], table)
    write_json(out, {"settings": SETTINGS, "records": records})


if __name__ == "__main__":
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    main(Path(sys.argv[1]), Path(sys.argv[2]))
