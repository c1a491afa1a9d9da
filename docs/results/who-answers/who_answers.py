"""Who answers in the fused stereo default: per real scene, the share of known pixels whose
value comes from SGBM, from the network and from the row fill, the bad-2 points each gets
wrong, and how far the fused answer moves when the network's weights change.

For every stereo scene under each ROOT the bundled ``matchstereo-hybrid`` runs its fused
default (:func:`crossview.models.dense.inference.predict_fields`, every setting the model's
own) and what it hands the fusion is recorded; the left view's fusion is then replayed step
by step (:func:`crossview.models.dense.sgbm_fusion.fusion_inputs`,
:func:`~crossview.models.dense.sgbm_fusion.fusion_steps`) and checked to give the default's
disparity bit for bit. Each known pixel gets the label of steps 1-3
(:func:`~crossview.models.dense.sgbm_fusion.fusion_sources`: SGBM, network, fill); the
pixels that step 4 (edge medians) and step 5 (out-of-view strip) then changed are counted
beside them (they overlap the three labels). bad-2 is scored as ``crossview eval`` and
``real_inference_settings.py`` score it (error > 2 px or non-finite, over the known pixels);
``wrong_*`` are the points of bad-2 (% of all known pixels) whose pixel carries that label, so
``wrong_sgbm + wrong_network + wrong_fill == bad2``. ``net_wrong_at_sgbm``: the points the
network (as the fusion receives it) would get wrong on SGBM's pixels, for comparison.

Then the weights change, as a user's fine-tuning would change them:

- ``perturb``: every floating parameter of a copy of the network times
  ``1 + SIGMA * N(0, 1)`` (seeded per scene), the fused default run again;
- ``adapt``: ``crossview.api.adapt_to_pair`` with ``ADAPT`` steps (the ``--adapt`` of the
  command line), the fused default run again (skipped when ``ADAPT=0``).

For each, per scene: the mean absolute change (px) of the fused left disparity and the share
of its pixels (all pixels) that moved by more than 0.5 px, the same for the network's own
answer (``net``: the field the fusion receives; with ``ALONE=1`` also ``alone``:
``--no-fuse``, the network with its own settings, which costs two more network runs a scene),
and the bad-2 of each after the change; ``labels_changed``: the share of pixels whose step 1-3
label changed.

Run: ``OMP_NUM_THREADS=2 python docs/results/who-answers/who_answers.py OUT.json
../shared/real-dev ../shared/real-train`` (``SCENES=a,b`` keeps only those scenes;
``SIGMA`` (default 0.05), ``ADAPT`` (default 2; 0: off), ``ADAPT_ROOTS`` (root names whose
scenes are adapted, default all), ``ALONE=1`` (``--no-fuse`` too)).
"""

from __future__ import annotations

import copy
import os
import sys
import time
import zlib
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np
import torch

import crossview
from crossview.data.datasets.scenes import SceneFolders
from crossview.geometry.disparity import field_to_disparity
from crossview.models.dense import inference, sgbm_fusion
from crossview.models.dense.sgbm_fusion import FILL, NETWORK, SGBM
from crossview.report import write_json
from crossview.train.pair_adaptation import AdaptationSettings, adapt_to_pair

MOVED_PX = 0.5
SOURCES = {"sgbm": SGBM, "network": NETWORK, "fill": FILL}


def wrong(disparity: np.ndarray, truth: np.ndarray) -> np.ndarray:
    """``[H, W]`` bool: bad-2 (error > 2 px, or a non-finite prediction)."""
    error = np.abs(np.where(np.isfinite(disparity), disparity, np.inf) - truth)
    return ~np.isfinite(error) | (error > 2.0)


def recorded_run(model: torch.nn.Module, sample: Mapping
                 ) -> tuple[inference.Fields, torch.Tensor, torch.Tensor, torch.Tensor, dict]:
    """The fused default on a scene (:func:`inference.predict_fields`, every setting the
    model's own) and what it handed the fusion: ``(fields, x0, x1, field, kwargs)``."""
    recorded = []

    def recording(x0: torch.Tensor, x1: torch.Tensor, field: torch.Tensor,
                  **kwargs: Any) -> sgbm_fusion.FusedFields:
        recorded.append((x0.clone(), x1.clone(), field.clone(), kwargs))
        return sgbm_fusion.fuse_with_sgbm(x0, x1, field, **kwargs)

    inference.fuse_with_sgbm = recording
    try:
        default = inference.predict_fields(model, sample["image0"], sample["image1"], "stereo")
    finally:
        inference.fuse_with_sgbm = sgbm_fusion.fuse_with_sgbm
    return (default, *recorded[0])


def fused_run(model: torch.nn.Module, sample: Mapping) -> dict[str, Any]:
    """The fused default on a scene, the fusion's inputs recorded: the left disparity
    (``fused``), the network's as the fusion receives it (``net``) and the left view's
    :class:`~crossview.models.dense.sgbm_fusion.FusionSteps` replayed (``steps``)."""
    default, x0, x1, field, kwargs = recorded_run(model, sample)
    left = sgbm_fusion.fusion_inputs(x0, x1, field, runs=kwargs.get("runs"))[0]
    steps = sgbm_fusion.fusion_steps(*left, medians=kwargs.get("medians"))
    fused = field_to_disparity(default.field[:1])[0].numpy()
    if not np.array_equal(fused, steps.fused):
        raise RuntimeError(f"{sample['name']}: the replayed fusion is not the default run's "
                           "(a pair run at a working size?)")
    return {"fused": fused, "net": left.network, "steps": steps}


def alone_run(model: torch.nn.Module, sample: Mapping) -> np.ndarray:
    """``--no-fuse``: the network with its own settings, left disparity ``[H, W]``."""
    fields = inference.predict_fields(model, sample["image0"], sample["image1"], "stereo",
                                      fuse=False)
    return field_to_disparity(fields.field[:1])[0].numpy()


def sources(run: Mapping[str, Any], truth: np.ndarray, valid: np.ndarray) -> dict[str, float]:
    """Shares (% of known pixels) and wrong points per source, and the default's bad-2."""
    steps = run["steps"]
    known = valid.sum()
    bad = wrong(run["fused"], truth) & valid
    pct = lambda mask: float(100 * (mask & valid).sum() / known)  # noqa: E731
    out: dict[str, float] = {"bad2": pct(bad)}
    for name, label in SOURCES.items():
        out[f"share_{name}"] = pct(steps.sources == label)
        out[f"wrong_{name}"] = pct(bad & (steps.sources == label))
    for name, changed in (("median", steps.medianed != steps.filled),
                          ("strip", steps.fused != steps.medianed)):
        out[f"share_{name}"] = pct(changed)
        out[f"wrong_{name}"] = pct(bad & changed)
    out["net_wrong_at_sgbm"] = pct(wrong(run["net"], truth) & (steps.sources == SGBM))
    out["net_bad2"] = pct(wrong(run["net"], truth))
    return out


def moved(before: np.ndarray, after: np.ndarray) -> dict[str, float]:
    """Mean absolute change (px) over all pixels and the share (%) moving more than
    :data:`MOVED_PX`."""
    change = np.abs(after.astype(np.float64) - before)
    return {"mean_abs": float(change.mean()), "moved": float(100 * (change > MOVED_PX).mean())}


def perturbed(model: torch.nn.Module, sigma: float, seed: int) -> torch.nn.Module:
    """A copy of ``model`` whose floating parameters are multiplied by ``1 + sigma * N(0, 1)``
    (a generator seeded with ``seed``)."""
    copied = copy.deepcopy(model)
    generator = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for parameter in copied.parameters():
            if parameter.is_floating_point():
                noise = torch.randn(parameter.shape, generator=generator)
                parameter.mul_(1 + sigma * noise.to(parameter))
    return copied


def changed(model: torch.nn.Module, base: Mapping[str, Any], alone: np.ndarray | None,
            sample: Mapping, truth: np.ndarray, valid: np.ndarray) -> dict[str, Any]:
    """The fused default and the network inside it (and ``--no-fuse`` unless ``alone`` is
    ``None``) with ``model``'s weights, against the shipped weights' (``base``, ``alone``)."""
    run = fused_run(model, sample)
    pct = lambda disparity: float(100 * (wrong(disparity, truth) & valid).sum()  # noqa: E731
                                  / valid.sum())
    out = {"fused": moved(base["fused"], run["fused"]), "net": moved(base["net"], run["net"]),
           "labels_changed": float(100 * (run["steps"].sources != base["steps"].sources)
                                   .mean()),
           "bad2": pct(run["fused"]), "net_bad2": pct(run["net"])}
    if alone is not None:
        other = alone_run(model, sample)
        out.update(alone=moved(alone, other), alone_bad2=pct(other))
    return out


def main(out: Path, roots: list[str]) -> None:
    only = {name for name in os.environ.get("SCENES", "").split(",") if name}
    sigma = float(os.environ.get("SIGMA", "0.05"))
    adapt = int(os.environ.get("ADAPT", "2"))
    with_alone = os.environ.get("ALONE", "0") == "1"
    adapt_roots = {name for name in os.environ.get("ADAPT_ROOTS", "").split(",") if name}
    model = crossview.load_model("matchstereo-hybrid")
    records = []
    for root in roots:
        scenes = SceneFolders(root, task="stereo")
        for index, name in enumerate(scenes.names()):
            if only and name not in only:
                continue
            start = time.perf_counter()
            sample = scenes[index]
            truth = np.asarray(sample["disparity"], np.float32)
            valid = np.asarray(sample["valid"], bool) & np.isfinite(truth)
            base = fused_run(model, sample)
            alone = alone_run(model, sample) if with_alone else None
            record: dict[str, Any] = {"root": Path(root).name, "scene": name,
                                      **sources(base, truth, valid)}
            if alone is not None:
                record["alone_bad2"] = float(100 * (wrong(alone, truth) & valid).sum()
                                             / valid.sum())
            seed = zlib.crc32(name.encode())
            record["perturb"] = changed(perturbed(model, sigma, seed), base, alone, sample,
                                        truth, valid)
            if adapt and (not adapt_roots or Path(root).name in adapt_roots):
                adapted = adapt_to_pair(model, sample["image0"], sample["image1"], "stereo",
                                        settings=AdaptationSettings(steps=adapt))
                record["adapt"] = changed(adapted, base, alone, sample, truth, valid)
            record["seconds"] = time.perf_counter() - start
            records.append(record)
            print(f"{name}: bad2 {record['bad2']:.2f} sgbm {record['share_sgbm']:.1f} % "
                  f"net {record['share_network']:.1f} % fill {record['share_fill']:.1f} %, "
                  f"perturbed fused moves {record['perturb']['fused']['mean_abs']:.3f} px "
                  f"({record['seconds']:.0f} s)", flush=True)
            write_json(out, {"sigma": sigma, "adapt": adapt, "adapt_roots": sorted(adapt_roots),
                             "alone": with_alone, "moved_px": MOVED_PX,
                             "records": records})


if __name__ == "__main__":
    main(Path(sys.argv[1]), sys.argv[2:])
