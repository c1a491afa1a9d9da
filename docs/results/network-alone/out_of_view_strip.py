"""How much of the fused default's error lies in the left view's out-of-view strip, and can the
network or the image fill it better (network-alone item 25)?

A left-view pixel whose true match ``x - d`` lies left of the right image cannot be matched;
the fused default's step 5 (:func:`crossview.geometry.out_of_view.extend_out_of_view`)
continues each row's strip linearly from the pixel after it. Per recorded scene (``record.py``)
the left view's default is replayed (steps 1-4 as recorded, step 5 recomputed and checked equal
to the recording) and scored:

- ``oov``: the share of the known pixels whose true match is out of view (``x < d``), and
  ``oov wrong`` the points of bad-2 (of all known pixels) the default gets wrong there;
  ``oov network wrong``: the same for the network's field as the fusion receives it;
- bad-2 % of the whole left view with the strip filled otherwise (steps 1-4 unchanged):
  ``shipped`` (the linear continuation), ``anchored`` (the network's disparity shifted per row
  to the medianed value: the median of ``medianed - network`` over the 16 px after the
  strip), ``colour S`` (the strip filled column by column from its end leftwards, each pixel
  the colour-weighted mean of the nine pixels 1-3 px to its right and up to 3 rows away,
  weights ``exp(-|I_j - I_i|_1 / S) / (1 + |dy|)``, each moved along the row's slope of the
  linear continuation; ``colour S flat`` without the slope).

JSON ``{scene: {setting: value}}``; means per root printed.

Run: ``OMP_NUM_THREADS=1 python docs/results/network-alone/out_of_view_strip.py /tmp/fusion-rec
docs/results/network-alone/out_of_view_strip.json`` (after ``record.py /tmp/fusion-rec
../shared/real-dev ../shared/real-train``).
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np

from crossview.geometry.out_of_view import extend_out_of_view, out_of_view_strip_end
from crossview.models.dense.sgbm_fusion import OUT_OF_VIEW

sys.path.insert(0, str(Path(__file__).parent))
from adapt_rate import scores
from record import replay

ANCHOR_SPAN = 16  # px after the strip over which the network is shifted to the medianed value
REACH = 3  # px: the colour fill's neighbours lie 1..REACH px right and up to REACH rows away
SIGMAS = (10.0, 20.0)


def anchored(medianed: np.ndarray, network: np.ndarray) -> np.ndarray:
    """``medianed [H, W]`` with its strip taken from ``network [H, W]`` shifted per row."""
    height, width = medianed.shape
    start = out_of_view_strip_end(medianed)
    rows = np.arange(height)[:, None]
    after = np.minimum(start[:, None] + np.arange(ANCHOR_SPAN)[None], width - 1)
    shift = np.median(medianed[rows, after] - network[rows, after], axis=1)
    strip = np.arange(width)[None] < start[:, None]
    return np.where(strip, np.maximum(network + shift[:, None], 0.0), medianed)


def colour_filled(medianed: np.ndarray, image: np.ndarray, sigma: float,
                  sloped: bool) -> np.ndarray:
    """``medianed [H, W]`` with its strip filled from its end leftwards, guided by ``image [H,
    W, 3]`` (module docstring)."""
    height, width = medianed.shape
    start = out_of_view_strip_end(medianed)
    line = extend_out_of_view(medianed, **OUT_OF_VIEW)
    slope = line[:, 1] - line[:, 0] if sloped else np.zeros(height, np.float32)
    out = medianed.astype(np.float32)
    colour = image.astype(np.float32)
    rows = np.arange(height)
    for x in range(int(start.max()) - 1, -1, -1):
        values, weights = [], []
        for dx in range(1, REACH + 1):
            source = min(x + dx, width - 1)
            for dy in range(-REACH, REACH + 1):
                near = np.clip(rows + dy, 0, height - 1)
                difference = np.abs(colour[near, source] - colour[:, x]).sum(-1)
                weights.append(np.exp(-difference / sigma) / (1 + abs(dy)))
                values.append(out[near, source] - slope * dx)
        estimate = (np.stack(values) * np.stack(weights)).sum(0) / np.stack(weights).sum(0)
        inside = start > x
        out[inside, x] = np.maximum(estimate[inside], 0.0)
    return out


def scene_row(d: dict) -> dict[str, float]:
    """The measures and settings on one recorded scene (module docstring)."""
    image, truth = d["left_image"], d["truth"]
    medianed, network = d["left_medianed"], d["left_network"]
    shipped = extend_out_of_view(medianed, **OUT_OF_VIEW)
    if not np.array_equal(shipped, d["left_fused"]):
        raise RuntimeError("the replayed strip is not the recorded default's")
    known = np.isfinite(truth) & (truth > 0)
    out_of_view = known & (np.arange(truth.shape[1])[None] < truth)

    def wrong_there(disparity: np.ndarray) -> float:
        return float(100 * (out_of_view & (np.abs(disparity - truth) > 2)).sum() / known.sum())

    row = {"oov": float(100 * out_of_view.sum() / known.sum()), "oov wrong": wrong_there(shipped),
           "oov network wrong": wrong_there(network), "shipped": scores(shipped, truth)[0],
           "anchored": scores(anchored(medianed, network), truth)[0]}
    for sigma in SIGMAS:
        for sloped, name in ((True, f"colour {sigma:g}"), (False, f"colour {sigma:g} flat")):
            row[name] = scores(colour_filled(medianed, image, sigma, sloped), truth)[0]
    return row


if __name__ == "__main__":
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    replay(Path(sys.argv[1]), Path(sys.argv[2]), scene_row)
