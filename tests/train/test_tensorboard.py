"""TensorBoard events of ``crossview train`` (:mod:`crossview.train.tensorboard_log`): the log's
records as scalars, validation pictures, purged on resume, off by config, optional package."""

from __future__ import annotations

import io
import json
import math
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch
import yaml
from PIL import Image
from recipe_configs import tiny_config
from train_standin import StandInModel, StandInStereo

from crossview.cli.app import main
from crossview.train.config import config_from_dict
from crossview.train.recipes import get_recipe
from crossview.train.recipes.fields import disparity_preview, flow_preview
from crossview.train.tensorboard_log import BOARD_DIR, PREVIEWS
from crossview.train.trainer import Trainer


def _accumulator(run_dir: Path) -> Any:
    """Everything the events of ``run_dir`` hold, read as TensorBoard reads them."""
    pytest.importorskip("tensorboard")
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    events = EventAccumulator(str(run_dir / BOARD_DIR), size_guidance={"scalars": 0,
                                                                         "images": 0})
    events.Reload()
    return events


def _records(run_dir: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in (run_dir / "log.jsonl").read_text().splitlines()]


def _assert_scalars_are_the_log(run_dir: Path) -> Any:
    """Each number of each log record is the scalar ``<kind>/<key>`` at its step (float32, as
    TensorBoard keeps it), once, and the events hold no other scalar."""
    events = _accumulator(run_dir)
    expected: dict[str, dict[int, float]] = {}
    for record in _records(run_dir):
        for key, value in record.items():
            if key not in ("kind", "step"):
                expected.setdefault(f"{record['kind']}/{key}", {})[record["step"]] = value
    assert set(events.Tags()["scalars"]) == set(expected)
    for tag, by_step in expected.items():
        points = events.Scalars(tag)
        assert [p.step for p in points] == sorted(by_step), tag  # one point per step
        for point in points:
            want = float(np.float32(by_step[point.step]))
            assert point.value == want or (math.isnan(want) and math.isnan(point.value)), tag
    return events


def _standin_run(out_dir: Path, resume: bool = False, **train: Any) -> dict[str, Any]:
    cfg = config_from_dict({"train": {"steps": 4, "batch_size": 2, "out_dir": str(out_dir),
                                      "log_every": 1, "val_every": 2, "ckpt_every": 2,
                                      "keep_last": 5, **train},
                            "optim": {"lr": 1e-2, "pct_start": 0.3}})
    torch.manual_seed(0)
    trainer = Trainer(cfg, model=StandInModel(), train_set=StandInStereo(),
                      val_set=StandInStereo(4), resume=resume, progress=False)
    return trainer.run()


def _cli(argv: list[str]) -> None:
    with pytest.raises(SystemExit) as done:
        main(argv)
    assert done.value.code == 0


@pytest.mark.slow
def test_a_run_writes_its_log_as_scalars_and_the_predictions_as_images(tmp_path: Path) -> None:
    pytest.importorskip("tensorboard")
    run_dir = tmp_path / "run"
    config = tmp_path / "tiny.yaml"
    config.write_text(yaml.safe_dump(tiny_config("stereo", tmp_path / "elsewhere",
                                                 val_every=2, ckpt_every=2)))
    _cli(["train", str(config), "--steps", "4", "--out-dir", str(run_dir)])
    events = _assert_scalars_are_the_log(run_dir)
    assert [r["step"] for r in _records(run_dir) if r["kind"] == "val"] == [2, 4]
    assert {"train/loss", "train/lr", "train/grad_norm", "train/samples_per_s",
            "val/epe", "val/bad2"} <= set(events.Tags()["scalars"])
    shown = min(PREVIEWS, 2)  # the tiny config validates on 2 samples
    assert sorted(events.Tags()["images"]) == [f"val/prediction_{i}" for i in range(shown)]
    for i in range(shown):
        images = events.Images(f"val/prediction_{i}")
        assert [image.step for image in images] == [2, 4]
        picture = np.asarray(Image.open(io.BytesIO(images[-1].encoded_image_string)))
        # the prediction and the ground truth (128 x 160 each) side by side, and a colour bar
        assert picture.shape[0] == 128 and picture.shape[1] > 2 * 160


def test_a_resume_purges_the_steps_it_logs_again(tmp_path: Path) -> None:
    pytest.importorskip("tensorboard")
    from tensorboard.backend.event_processing.event_file_loader import EventFileLoader

    _standin_run(tmp_path)
    # as if killed after logging step 4 but before its checkpoint: the run goes on from step 2
    (tmp_path / "step-00000004.pt").unlink()
    first = sorted((tmp_path / BOARD_DIR).iterdir())
    summary = _standin_run(tmp_path, resume=True)
    assert summary["steps_run"] == 2
    events = _assert_scalars_are_the_log(tmp_path)  # steps 3 and 4 once: the resumed run's
    assert [image.step for image in events.Images("val/prediction_0")] == [2, 4]
    later = sorted(set((tmp_path / BOARD_DIR).iterdir()) - set(first))
    assert len(later) == 1 and later[0].name > first[-1].name  # read after the first part's
    starts = [event.step for event in EventFileLoader(str(later[0])).Load()
              if event.HasField("session_log")]
    assert starts == [3]  # what readers purge from: the steps after the checkpoint's


def test_train_tensorboard_false_writes_no_events(tmp_path: Path,
                                                  log_lines: Callable[[], str]) -> None:
    _standin_run(tmp_path, tensorboard=False)
    assert (tmp_path / "log.jsonl").is_file()
    assert not (tmp_path / BOARD_DIR).exists()
    assert "tensorboard" not in log_lines().lower()


def test_without_tensorboard_the_run_succeeds_with_one_note(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, log_lines: Callable[[], str]) -> None:
    monkeypatch.setitem(sys.modules, "tensorboard", None)  # `import tensorboard` fails
    summary = _standin_run(tmp_path)
    assert summary["step"] == 4 and (tmp_path / "log.jsonl").is_file()
    assert not (tmp_path / BOARD_DIR).exists()
    notes = [line for line in log_lines().splitlines() if "tensorboard" in line.lower()]
    assert len(notes) == 1 and notes[0].startswith("note: ")
    assert "`pip install tensorboard`" in notes[0]


class TestPreviews:
    def test_disparity_beside_its_ground_truth_on_one_colour_range(self) -> None:
        truth = np.tile(np.linspace(1, 9, 40), (30, 1))
        known = np.ones_like(truth, bool)
        known[:5] = False
        picture = disparity_preview(truth, truth, known)
        assert picture.dtype == np.uint8 and picture.shape[0] == 30
        prediction, gap, shown = picture[:, :40], picture[:, 40:44], picture[:, 44:84]
        assert (gap == 255).all()
        assert (shown[:5] == 0).all()  # no ground truth: black
        np.testing.assert_array_equal(prediction[5:], shown[5:])  # the same colours
        assert picture.shape[1] > 84  # the colour bar
        assert disparity_preview(truth).shape[0] == 30  # without ground truth

    def test_flow_beside_its_ground_truth_and_nan_predictions(self) -> None:
        truth = np.random.default_rng(0).normal(size=(32, 48, 2))
        known = np.ones((32, 48), bool)
        picture = flow_preview(truth, truth, known)
        np.testing.assert_array_equal(picture[:, :48], picture[:, 52:100])
        assert flow_preview(np.full_like(truth, np.nan), truth, known).dtype == np.uint8
        assert flow_preview(truth).shape[1] > 48  # the key, without ground truth

    def test_a_recipe_draws_nothing_by_default(self) -> None:
        assert get_recipe("semantic").preview({}, np.zeros(3)) is None
        stereo = get_recipe("stereo").preview(
            {"disparity": np.ones((8, 8)), "valid": np.ones((8, 8), bool)}, np.ones((8, 8)))
        assert stereo is not None and stereo.shape[:2] == (8, stereo.shape[1])
