"""The loop the fusion studies share: the bundled stereo network on every scene of a root,
each study's settings scored per scene, records for ``real_choice.py``.

A study gives :func:`run_study` a function ``settings(scene) -> {setting: left disparity [H,
W]}`` of a :class:`NetworkScene` (by default the scene as it is and the network with lri and
refinement, without the fusion; ``scene=`` prepares it otherwise); the records (format of
``real_inference_settings.py``) are written to OUT after every scene, so that a long run can be
read while it goes on."""

from __future__ import annotations

import os
import sys
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch

import crossview
from crossview.data.datasets.scenes import SceneFolders
from crossview.geometry.disparity import field_to_disparity
from crossview.geometry.edge_weighted_median import edge_weighted_median
from crossview.models.dense.classical import sgbm_num_disparities
from crossview.models.dense.inference import predict_fields
from crossview.models.dense.sgbm_fusion import EDGE_MEDIANS
from crossview.report import write_json

sys.path.insert(0, str(Path(__file__).parent))
from real_inference_settings import scores  # the scoring of the settings script


@dataclass
class NetworkScene:
    """One scene and the network's answer on it: the RGB uint8 ``left``/``right`` images, the
    ground truth ``truth [H, W]`` and its ``valid`` mask, the network's ``field [2, H, W, 2]``
    (both views), ``net``/``net_right`` ``[H, W]`` disparities and SGBM's ``search`` range as
    the fusion sets it."""

    left: np.ndarray
    right: np.ndarray
    truth: np.ndarray
    valid: np.ndarray
    field: torch.Tensor
    net: np.ndarray
    net_right: np.ndarray
    search: int


def network_scene(model: torch.nn.Module, left: np.ndarray, right: np.ndarray,
                  truth: np.ndarray, valid: np.ndarray, **run: Any) -> NetworkScene:
    """The network (``run``: :func:`predict_fields`'s lri, refine, size; never the fusion) on
    the pair ``[H, W, 3]``, as a :class:`NetworkScene`."""
    field = predict_fields(model, left, right, "stereo", fuse=False, **run).field
    net = field_to_disparity(field[:1])[0].numpy()
    net_right = field_to_disparity(field[1:], "right")[0].numpy()
    return NetworkScene(left, right, truth, valid, field, net, net_right,
                        sgbm_num_disparities(float(max(net.max(), net_right.max()))))


def default_scene(model: torch.nn.Module, sample: Mapping) -> NetworkScene:
    """A scene as it is, the network with lri and refinement (its defaults without fusion)."""
    return network_scene(model, sample["image0"], sample["image1"], sample["disparity"],
                         sample["valid"], lri=True, refine=True)


def medians(disparity: np.ndarray, image: np.ndarray) -> np.ndarray:
    """The fusion's shipped edge medians (step 4), in order: ``[H, W]`` -> ``[H, W]``."""
    for median in EDGE_MEDIANS:
        disparity = edge_weighted_median(disparity, image, **median)
    return disparity


def run_study(out: Path, root: str, settings: Callable[[NetworkScene], dict[str, np.ndarray]],
              shown: Callable[[str], bool] = lambda setting: True, *,
              scene: Callable[[torch.nn.Module, Mapping], NetworkScene] = default_scene,
              refine: bool = True, **header: Any) -> None:
    """Score ``settings`` on every stereo scene under ``root`` (``SCENES=a,b,...`` in the
    environment keeps only those), each prepared by ``scene``, and write the records (their
    ``refine`` field as given; ``header`` added to the JSON) to ``out``; prints each scene's
    bad-2 of the ``shown`` settings."""
    only = set(os.environ.get("SCENES", "").split(",")) - {""}
    model = crossview.load_model("matchstereo-hybrid")
    scenes = SceneFolders(root, task="stereo")
    records = []
    for index, name in enumerate(scenes.names()):
        if only and name not in only:
            continue
        prepared = scene(model, scenes[index])
        for setting, disparity in settings(prepared).items():
            records.append({"root": root, "scene": name, "refine": refine, "setting": setting,
                            "seconds": 0.0,
                            **scores(disparity, prepared.truth, prepared.valid)})
        print(name, {r["setting"]: round(r["bad2"], 2) for r in records
                     if r["scene"] == name and shown(r["setting"])}, flush=True)
        write_json(out, {"weights": "bundled", **header, "records": records})
