"""The self-supervised term in the trainer: real unlabelled pairs join the synthetic batch."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
import torch
from PIL import Image

from crossview.errors import UserError
from crossview.train.config import config_from_dict
from crossview.train.recipes.fields import pair_rows
from crossview.train.trainer import Trainer

TINY = {"dims": [8, 8, 8, 8], "encoder_depths": [1, 1, 1, 1], "decoder_layers": [1, 1, 1, 1],
        "radii": [1, 1, 1, 1], "heads": 2, "encoder_head": 0}
TINY_MODELS = {"flow": {"name": "matchflow-b", "overrides": TINY},
               "stereo": {"name": "matchstereo-b", "overrides": TINY}}


def _sequence(folder: Path, count: int = 3) -> Path:
    folder.mkdir(parents=True)
    base = np.random.default_rng(0).integers(0, 255, (192, 208, 3), dtype=np.uint8)
    for i in range(count):  # a texture moving 2 px right per frame
        Image.fromarray(base[:, 8 - 2 * i:8 - 2 * i + 192]).save(folder / f"{i:02d}.png")
    return folder.parent


def _stereo_pair(folder: Path) -> Path:
    folder.mkdir(parents=True)
    base = np.random.default_rng(1).integers(0, 255, (192, 208, 3), dtype=np.uint8)
    Image.fromarray(base[:, 8:200]).save(folder / "left.png")  # disparity 4 px everywhere
    Image.fromarray(base[:, 12:204]).save(folder / "right.png")
    return folder.parent


def _cfg(tmp_path: Path, real: str, weight: float = 50.0, task: str = "flow") -> object:
    return config_from_dict({
        "task": task, "model": TINY_MODELS[task],
        "data": {"train": f"synthetic-{task}", "val": f"synthetic-{task}", "train_size": 8,
                 "val_size": 0, "height": 192, "width": 192, "real": real, "real_batch_size": 1},
        "loss": {"photometric_weight": weight},
        "train": {"steps": 3, "batch_size": 1, "out_dir": str(tmp_path / "run"), "log_every": 1,
                  "ckpt_every": 3, "val_every": 3}})


@pytest.mark.parametrize("task", ["flow", "stereo"])
def test_steps_log_the_photometric_term(tmp_path: Path, task: str) -> None:
    make = _sequence if task == "flow" else _stereo_pair
    root = make(tmp_path / "real" / "moving")
    Trainer(_cfg(tmp_path, str(root), task=task), progress=False).run()
    records = [json.loads(line) for line in (tmp_path / "run" / "log.jsonl").read_text()
               .splitlines()]
    train = [r for r in records if r["kind"] == "train"]
    assert len(train) == 3
    for r in train:
        assert {"photometric", "smooth", "consistent", "init", "self", "cross"} <= set(r)
        # a random network may have no forward-backward consistent pixel (then the masked
        # census term is 0): the term's range and its share of the loss are what is checked
        assert 0 <= r["photometric"] < 1 and 0 <= r["consistent"] <= 1
        assert np.isfinite(r["loss"])
        supervised = r["init"] + r["self"] + r["cross"]
        assert r["loss"] == pytest.approx(supervised + 50.0 * (r["photometric"]
                                                               + 0.5 * r["smooth"]), rel=1e-4)


@pytest.mark.parametrize(("task", "real", "message"), [
    ("flow", "", "unlabelled image sequences"), ("stereo", "", "rectified stereo pairs"),
    ("stereo", "REAL", "holds a left and a right image"), ("flow", "MISSING", "not a folder"),
    ("stereo", "MISSING", "not a folder")])
def test_the_term_needs_a_folder_of_the_task_s_pairs(tmp_path: Path, task: str, real: str,
                                          message: str) -> None:
    root = _sequence(tmp_path / "real" / "moving")
    real = {"REAL": str(root), "MISSING": str(tmp_path / "nowhere")}.get(real, real)
    with pytest.raises(UserError, match=message):
        Trainer(_cfg(tmp_path, real, task=task), progress=False)


def test_pair_rows_keeps_both_views_of_the_chosen_pairs() -> None:
    rows = torch.arange(6).view(6, 1).float()  # 3 pairs: reference rows 0-2, target rows 3-5
    outputs = {"field": rows, "fields": [rows, rows * 10], "field_kinds": ["self", "cross"],
               "init_cv": None}
    picked = pair_rows(outputs, range(1, 3), 3)
    assert picked["field"].flatten().tolist() == [1, 2, 4, 5]
    assert picked["fields"][1].flatten().tolist() == [10, 20, 40, 50]
    assert picked["field_kinds"] == ["self", "cross"] and picked["init_cv"] is None
    assert pair_rows(outputs, range(3), 3) is outputs
