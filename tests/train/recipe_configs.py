"""Tiny training configurations, one per recipe, for fast tests (also read by subprocesses)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

_MICRO_MATCHSTEREO = {"dims": [8, 8, 8, 8], "encoder_depths": [1, 1, 1, 1],
                      "decoder_layers": [1, 1, 1, 1], "radii": [1, 1, 1, 1], "heads": 2,
                      "encoder_head": 0}

TINY: dict[str, dict[str, Any]] = {
    "stereo": {"task": "stereo",
               "model": {"name": "matchstereo-t", "overrides": _MICRO_MATCHSTEREO},
               "data": {"train_size": 8, "val_size": 2, "height": 128, "width": 160}},
    "flow": {"task": "flow", "model": {"name": "matchflow-b", "overrides": _MICRO_MATCHSTEREO},
             "data": {"train": "synthetic-flow", "val": "synthetic-flow", "train_size": 8,
                      "val_size": 2, "height": 160, "width": 160}},
    "semantic": {"task": "semantic", "model": {"name": "transformatcher",
                                               "overrides": {"grid": 3}},
                 "data": {"train": "synthetic-warps", "val": "synthetic-warps", "train_size": 8,
                          "val_size": 2},
                 "recipe": {"keypoints": 8, "dense_weight": 1.0, "backbone_lr": 1e-4},
                 "optim": {"weight_decay": 0.0, "schedule": "constant", "grad_clip": 0.0}},
    "novel-view": {"task": "novel-view",
                   "model": {"name": "multiview", "overrides": {"conditioning": "prope",
                                                                "width": 16, "depth": 1,
                                                                "heads": 2}},
                   "data": {"train": "camera-scenes", "val": "camera-scenes", "train_size": 8,
                            "val_size": 2, "height": 16, "width": 16},
                   "recipe": {"scenes": 3, "views": 4},
                   "optim": {"schedule": "cosine", "pct_start": 0.3}},
    "multiview-depth": {"task": "multiview-depth",
                        "model": {"name": "multiview-depth",
                                  "overrides": {"conditioning": "prope", "width": 16,
                                                "depth": 1, "heads": 2}},
                        "data": {"train": "depth-scenes", "val": "depth-scenes",
                                 "train_size": 8, "val_size": 2, "height": 16, "width": 16},
                        "recipe": {"scenes": 3, "views": 2},
                        "optim": {"schedule": "cosine", "pct_start": 0.3}},
}


def tiny_config(task: str, out_dir: Path, **train: Any) -> dict[str, Any]:
    """The tiny config of ``task`` writing to ``out_dir``: 3 steps of batch 2, a checkpoint
    every step, validation at step 2 and 3, learning rate 1e-3 (``train`` overrides)."""
    values = TINY[task]
    return {**values, "optim": {"lr": 1e-3, **values.get("optim", {})},
            "train": {"steps": 3, "batch_size": 2, "out_dir": str(out_dir), "log_every": 1,
                      "val_every": 2, "ckpt_every": 1, "keep_last": 5, **train}}
