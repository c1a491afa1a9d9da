"""``--adapt N`` on ``crossview stereo`` and ``crossview eval``: the output is the adapted
model's, announced by a note; a bad step count is one error line with exit code 2."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
import torch
from PIL import Image

import crossview
from crossview import api
from crossview.cli.app import main
from crossview.data import io
from crossview.errors import UserError
from crossview.models.dense.inference import dense_predictor
from crossview.models.matchstereo import MatchStereo
from crossview.models.registry import ModelSpec, register_model
from small_networks import SMALL

register_model(ModelSpec("adapt-test-stereo", lambda: MatchStereo(SMALL), "stereo",
                         predictor=dense_predictor), replace=True)
pytestmark = pytest.mark.filterwarnings("ignore::crossview.api.RandomWeightsWarning")


def _pair(folder: Path) -> tuple[Path, Path, np.ndarray, np.ndarray]:
    rng = np.random.default_rng(0)
    coarse = rng.integers(0, 256, (24, 26, 3), dtype=np.uint8)
    left = np.asarray(Image.fromarray(coarse).resize((208, 192), Image.BICUBIC))
    right = np.roll(left, -3, axis=1)
    folder.mkdir(parents=True, exist_ok=True)
    paths = folder / "left.png", folder / "right.png"
    Image.fromarray(left).save(paths[0])
    Image.fromarray(right).save(paths[1])
    return *paths, left, right


def _run(args: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    with pytest.raises(SystemExit) as done:
        main(args)
    captured = capsys.readouterr()
    return done.value.code, captured.out, captured.err


def _seeded_model() -> torch.nn.Module:
    torch.manual_seed(0)
    return crossview.load_model("adapt-test-stereo")


def test_stereo_adapt_writes_the_adapted_models_disparity(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    left, right, left_image, right_image = _pair(tmp_path / "in")
    torch.manual_seed(0)  # the registered model's random weights, as _seeded_model's
    code, _, err = _run(["stereo", str(left), str(right), "-o", str(tmp_path / "out"),
                           "--model", "adapt-test-stereo", "--adapt", "2", "--format", "npy"],
                          capsys)
    assert code == 0, err
    assert "note: adapting adapt-test-stereo to" in err and "(2 steps)" in err
    written = io.read_npy(tmp_path / "out" / "left_disp.npy")
    model = _seeded_model()
    adapted = crossview.estimate_disparity(left_image, right_image, model=model, adapt=2)
    plain = crossview.estimate_disparity(left_image, right_image, model=model)
    assert np.array_equal(written, adapted.disparity[0].numpy())
    assert not np.array_equal(written, plain.disparity[0].numpy())


def test_a_negative_step_count_is_one_error_line(tmp_path: Path,
                                                 capsys: pytest.CaptureFixture[str]) -> None:
    left, right, *_ = _pair(tmp_path / "in")
    code, _, err = _run(["stereo", str(left), str(right), "-o", str(tmp_path / "out"),
                           "--model", "adapt-test-stereo", "--adapt", "-1"], capsys)
    assert code == 2 and "--adapt" in err and "Traceback" not in err
    assert not (tmp_path / "out").exists()


def test_eval_adapt_scores_each_scene_with_its_adapted_copy(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    *_, left_image, right_image = _pair(tmp_path / "scenes" / "one")
    truth = np.full(left_image.shape[:2], 3.0, np.float32)
    io.write_npy(tmp_path / "scenes" / "one" / "gt.npy", truth)
    out = tmp_path / "eval.json"
    torch.manual_seed(0)
    code, _, err = _run(["eval", "--model", "adapt-test-stereo", "--dataset",
                         f"scenes:{tmp_path / 'scenes'}", "--adapt", "2", "--json", str(out)],
                        capsys)
    assert code == 0, err
    payload = json.loads(out.read_text())
    assert payload["adapt"] == 2
    # the rate the run adapted at, as the api chooses it for the model and its options
    assert payload["adapt_lr"] == api.adaptation_settings(_seeded_model(), "stereo", 2,
                                                          None).lr
    disparity = crossview.estimate_disparity(left_image, right_image, model=_seeded_model(),
                                             adapt=2).disparity[0].numpy()
    expected = float(np.abs(disparity - truth).mean())
    assert payload["per_sample"][0]["epe_holes"] == pytest.approx(expected, rel=1e-5)


def test_a_predictor_of_a_model_without_dense_fields_refuses_adaptation() -> None:
    model = crossview.load_model("transformatcher")
    with pytest.raises(UserError, match="test-time adaptation needs a stereo or flow model"):
        api.predictor(model, adapt=1)
