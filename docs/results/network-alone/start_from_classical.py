"""The network started from classical matching (issue 50 item 2, "classical matching as the
network's start"), without training for it.

Per stereo scene of each ROOT, bad-2 (% of known pixels, error > 2 px or non-finite) of:
``fused`` (the default), ``alone`` (``--no-fuse``: the network with its own settings),
``sgbm_filled`` (the fusion's SGBM runs left-right checked and filled along the row, no
network pixel, no median: its steps 1 and 3 alone), and the network run with a warm start
(``init`` of :func:`crossview.models.dense.inference.predict_fields`, the stereo video's
warm start) from ``sgbm_filled`` (``from_sgbm``) or from the fused default's fields
(``from_fused``), each without and with the photometric refinement (``_refined``). If the
network kept a good start, ``from_fused`` would stay near ``fused``.

Run: ``OMP_NUM_THREADS=2 python docs/results/network-alone/start_from_classical.py OUT.json
ROOT [ROOT ...]``
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import numpy as np
import torch
import torch.nn.functional as F

import crossview
from crossview.data.datasets.scenes import SceneFolders
from crossview.geometry.disparity import field_to_disparity
from crossview.models.dense import inference, sgbm_fusion
from crossview.models.dense.classical import fill_holes
from crossview.report import write_json

sys.path.insert(0, str(Path(__file__).parents[1] / "who-answers"))
from who_answers import recorded_run


def bad2(disparity: np.ndarray, truth: np.ndarray, known: np.ndarray) -> float:
    """bad-2 (%) over the ``known`` pixels."""
    error = np.abs(np.where(np.isfinite(disparity), disparity, np.inf) - truth)
    return float(100 * ((~np.isfinite(error) | (error > 2)) & known).sum() / known.sum())


def left(fields: torch.Tensor) -> np.ndarray:
    """The first left disparity ``[H, W]`` of fields ``[2B, H, W, 2]``."""
    return field_to_disparity(fields[:1])[0].numpy()


def scene_row(model: torch.nn.Module, sample: dict[str, Any]) -> dict[str, float]:
    """The columns of the module docstring for one scene."""
    truth = np.asarray(sample["disparity"], np.float32)
    known = np.asarray(sample["valid"], bool) & np.isfinite(truth)
    fused, x0, x1, field, kwargs = recorded_run(model, sample)
    views = sgbm_fusion.fusion_inputs(x0, x1, field, runs=kwargs.get("runs"))
    filled = [torch.from_numpy(fill_holes(view.classical)) for view in views]
    start = torch.zeros(2, *filled[0].shape, 2)
    start[0, ..., 0], start[1, ..., 0] = -filled[0], filled[1]  # left: x = -disparity
    scale = truth.shape[1] / filled[0].shape[1]
    at_pair = F.interpolate(filled[0][None, None], size=truth.shape, mode="nearest")[0, 0]
    row = {"fused": bad2(left(fused.field), truth, known),
           "alone": bad2(left(inference.predict_fields(model, sample["image0"],
                                                       sample["image1"], "stereo",
                                                       fuse=False).field), truth, known),
           "sgbm_filled": bad2(at_pair.numpy() * scale, truth, known)}
    for name, init in (("from_sgbm", start), ("from_fused", fused.field)):
        for refine in (False, True):
            fields = inference.predict_fields(model, sample["image0"], sample["image1"],
                                              "stereo", fuse=False, init=init, refine=refine)
            row[name + ("_refined" if refine else "")] = bad2(left(fields.field), truth, known)
    return row


def main(out: Path, roots: list[str]) -> None:
    model = crossview.load_model("matchstereo-hybrid")
    rows: dict[str, dict[str, float]] = {}
    for root in roots:
        scenes = SceneFolders(root, task="stereo")
        for index, name in enumerate(scenes.names()):
            rows[f"{Path(root).name}/{name}"] = scene_row(model, scenes[index])
            print(name, {k: round(v, 2) for k, v in rows[f"{Path(root).name}/{name}"].items()},
                  flush=True)
    columns = list(next(iter(rows.values())))
    means = {root: {c: float(np.mean([r[c] for n, r in rows.items()
                                      if n.startswith(f"{Path(root).name}/")]))
                    for c in columns} for root in roots}
    print("means", means)
    write_json(out, {"scenes": rows, "means": means})


if __name__ == "__main__":
    if len(sys.argv) < 3:
        sys.exit(__doc__)
    main(Path(sys.argv[1]), sys.argv[2:])
