"""Record what the fused stereo default hands its fusion, per real scene, for the study of a
learned fusion (docs/results/network-alone/README.md).

For every stereo scene under each ROOT the bundled ``matchstereo-hybrid`` runs its fused
default (:func:`crossview.models.dense.inference.predict_fields`, every setting the model's
own); the fusion's inputs are recorded and both views are replayed step by step
(:func:`crossview.models.dense.sgbm_fusion.fusion_inputs`, ``fusion_steps``); the left view's
replay is checked to equal the default's disparity bit for bit. One ``.npz`` per scene in
OUT_DIR: per view (``left``/``right`` prefix) the image ``[H, W, 3]`` uint8, the network's
disparity ``[H, W]`` float32 px and its consistency mask, SGBM's checked disparity (NaN at
holes), the step 1-3 labels, the filled, medianed and fused disparities; the left ground
truth ``truth [H, W]`` (NaN where unknown).

Run: ``OMP_NUM_THREADS=2 python docs/results/network-alone/record.py OUT_DIR ROOT [ROOT ...]``
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import torch

import crossview
from crossview.data.datasets.scenes import SceneFolders
from crossview.geometry.disparity import field_to_disparity
from crossview.models.dense import sgbm_fusion
from crossview.report import write_json

sys.path.insert(0, str(Path(__file__).parents[1] / "who-answers"))
from who_answers import recorded_run


def record_scene(model: torch.nn.Module, sample: dict[str, Any]) -> dict[str, np.ndarray]:
    """Both views' fusion inputs and steps of the fused default on ``sample``."""
    default, x0, x1, field, kwargs = recorded_run(model, sample)
    views = sgbm_fusion.fusion_inputs(x0, x1, field, runs=kwargs.get("runs"))
    arrays: dict[str, np.ndarray] = {}
    for view in views:
        steps = sgbm_fusion.fusion_steps(*view, medians=kwargs.get("medians"))
        prefix = view.view
        arrays.update({f"{prefix}_image": view.image, f"{prefix}_network": view.network,
                       f"{prefix}_consistent": view.consistent,
                       f"{prefix}_classical": view.classical,
                       f"{prefix}_sources": steps.sources, f"{prefix}_filled": steps.filled,
                       f"{prefix}_medianed": steps.medianed, f"{prefix}_fused": steps.fused})
    fused = field_to_disparity(default.field[:1])[0].numpy()
    if not np.array_equal(fused, arrays["left_fused"]):
        raise RuntimeError(f"{sample['name']}: the replayed fusion is not the default run's")
    truth = np.asarray(sample["disparity"], np.float32)
    valid = np.asarray(sample["valid"], bool) & np.isfinite(truth)
    arrays["truth"] = np.where(valid, truth, np.nan).astype(np.float32)
    return arrays


def replay(records: Path, out: Path, scene_row: Callable[[dict], dict[str, float]]) -> None:
    """A study's ``scene_row`` (the recorded arrays of one scene -> ``{setting: value}``) on
    every scene recorded in ``records``: JSON ``{scene: row}`` written to ``out`` after every
    scene, each row and the means per root printed."""
    table = {}
    for path in sorted(records.glob("*.npz")):
        with np.load(path) as data:
            table[path.stem] = scene_row(dict(data))
        print(path.stem, {k: round(v, 2) for k, v in table[path.stem].items()}, flush=True)
        write_json(out, table)
    for root in ("real-train", "real-dev"):
        keys = [k for k in table if k.startswith(f"{root}__")]
        print(root, len(keys), {s: round(float(np.mean([table[k][s] for k in keys])), 3)
                                for s in table[keys[0]]})


def main(out_dir: Path, roots: list[str]) -> None:
    out_dir.mkdir(parents=True, exist_ok=True)
    model = crossview.load_model("matchstereo-hybrid")
    for root in roots:
        scenes = SceneFolders(root, task="stereo")
        for index, name in enumerate(scenes.names()):
            target = out_dir / f"{Path(root).name}__{name}.npz"
            if target.exists():
                continue
            start = time.perf_counter()
            arrays = record_scene(model, scenes[index])
            np.savez_compressed(target, **arrays)
            print(f"{name}: {time.perf_counter() - start:.1f} s", flush=True)


if __name__ == "__main__":
    if len(sys.argv) < 3:
        sys.exit(__doc__)
    main(Path(sys.argv[1]), sys.argv[2:])
