"""How far the TransforMatcher pipeline gets on held-out warps, stage by stage.

:func:`evaluate_warps` scores, on warps of the held-out photographs (never trained on), the raw
correlation arg-max, the soft-argmax without attention, the refined model and the exact
correspondence on the output grid: PCK@0.05 / @0.1 (``img`` threshold) and the median keypoint
error. The training recipe (:mod:`crossview.train.recipes.semantic`) validates the refined
model alone, through :func:`crossview.eval.evaluate`.

>>> from crossview.models.transformatcher.inference import load_transformatcher
>>> result = evaluate_warps(load_transformatcher(), pairs=96)     # doctest: +SKIP
>>> result["refined"]["pck@0.1"]                                   # doctest: +SKIP
"""

from __future__ import annotations

import torch

from crossview.data.synthetic.warp_batches import warp_batch, warp_dataset
from crossview.metrics.keypoints import pck
from crossview.models.keypoints.coordinates import normalised_to_pixels, pixels_to_normalised
from crossview.models.transformatcher.correlation import upsample_correlation
from crossview.models.transformatcher.loss import oracle_coords
from crossview.models.transformatcher.model import EVAL_TAU, TransforMatcher, raw_argmax_coords
from crossview.models.transformatcher.softargmax import kernel_soft_argmax

# Inverse temperature of the no-attention soft-argmax baseline, chosen on *training* warps
# (16 pairs, 128 px: 20 -> 30.9, 50 -> 44.5, 100 -> 44.7 PCK@0.05; the hard arg-max gave 43.9).
RAW_SOFTARGMAX_BETA = 50.0


@torch.no_grad()
def evaluate_warps(model: TransforMatcher, pairs: int = 48, seed: int = 0, keypoints: int = 32,
                   batch: int = 4, imagenet: TransforMatcher | None = None,
                   ) -> dict[str, dict[str, float]]:
    """PCK@0.05 / @0.1 (``img`` threshold, pooled over keypoints) and the median keypoint error
    in pixels on held-out warps at the model's input size, for ``raw`` (hard arg-max of the
    channel-mean correlation of the model's backbone), ``raw_softargmax`` (the kernel
    soft-argmax on it: the pipeline without attention), ``refined`` (the model) and ``oracle``
    (the exact correspondence at the output grid's cell centres, :func:`oracle_coords`). With
    ``imagenet`` (a model of the same grid whose backbone has its original ImageNet weights,
    for a ``model`` with a tuned backbone), also ``raw_imagenet``: the hard arg-max of that
    backbone's correlation."""
    model.eval()
    size = model.image_size
    data = warp_dataset("heldout", size, pairs, seed, keypoints)
    names = ("raw", *(("raw_imagenet",) if imagenet is not None else ()), "raw_softargmax",
             "refined", "oracle")
    scores: dict[str, dict[float, list]] = {name: {0.05: [], 0.1: []} for name in names}
    errors: dict[str, list[torch.Tensor]] = {name: [] for name in names}
    for start in range(0, pairs, batch):
        b = warp_batch(data, list(range(start, min(pairs, start + batch))))
        out = model(b["src"], b["tgt"])
        kp = pixels_to_normalised(b["kp_src"], size, size)
        soft = kernel_soft_argmax(upsample_correlation(out["corr"].mean(1), model.upsample),
                                  model.sigma, RAW_SOFTARGMAX_BETA)
        exact = oracle_coords(b["flow"], out["coords"].shape[1], model.frame_shift)
        found = {"raw": raw_argmax_coords(out["corr"], model.upsample),
                 "raw_softargmax": soft, "refined": out["coords"], "oracle": exact}
        if imagenet is not None:
            found["raw_imagenet"] = raw_argmax_coords(imagenet.correlation(b["src"], b["tgt"]),
                                                      model.upsample)
        for name, coords in found.items():
            pred = normalised_to_pixels(model.transfer(coords, kp, EVAL_TAU), size, size)
            errors[name].append((pred - b["kp_tgt"]).norm(dim=-1).flatten())
            for alpha, hits in scores[name].items():
                for p, g in zip(pred.numpy(), b["kp_tgt"].numpy(), strict=True):
                    hits.append(pck(p, g, None, alpha * size))
    return {name: {**{f"pck@{alpha:g}": sum(s.total for s in hits) / sum(s.count for s in hits)
                      for alpha, hits in per.items()},
                   "median_px": torch.cat(errors[name]).median().item()}
            for name, per in scores.items()}
