"""Fine-tuning the default stereo model on one real scene reaches the network's answer
(issue 50 item 3): ``configs/finetune-stereo.yaml`` run a few steps on scikit-image's Middlebury
2014 Motorcycle pair (real photographs with ground truth, shipped inside scikit-image) lowers
the network's own error on that scene (``--no-fuse``: what ONNX ``--bare`` and a GPU run) and
that of its self-fused answer (``--self-fuse``: every value the network's); the
fused default's answer is SGBM's and the fill's there, which the command line says in a
``note:`` pointing to ``--no-fuse``."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch
import yaml
from skimage import data as skimage_data

from cli_runner import run_cli
from crossview import api
from crossview.data import io
from crossview.defaults import DEFAULT_STEREO_MODEL

CONFIG = Path(__file__).resolve().parents[2] / "configs" / "finetune-stereo.yaml"
SCALE = 0.5  # the pair at half its size: 250x370 px, so that the test runs in a minute


def _motorcycle(folder: Path) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The Motorcycle pair at :data:`SCALE` written as a scene folder: ``(left [H, W, 3]
    uint8, right, disparity [H, W] float32 px, NaN unknown)``."""
    left, right, disparity = skimage_data.stereo_motorcycle()
    h, w = (round(n * SCALE) for n in disparity.shape)
    images = [np.asarray(torch.nn.functional.interpolate(
        torch.from_numpy(image).permute(2, 0, 1)[None].float(), size=(h, w), mode="area")[0]
        .permute(1, 2, 0).round().clamp(0, 255).to(torch.uint8)) for image in (left, right)]
    known = np.isfinite(disparity)
    truth = np.where(known, disparity, 0.0)[::2, ::2][:h, :w] * SCALE  # every other pixel
    truth = np.where(known[::2, ::2][:h, :w], truth, np.nan).astype(np.float32)
    folder.mkdir(parents=True)
    io.write_image(folder / "left.png", images[0])
    io.write_image(folder / "right.png", images[1])
    io.write_npy(folder / "gt.npy", truth)
    return images[0], images[1], truth


def _errors(model: torch.nn.Module, left: np.ndarray, right: np.ndarray,
            truth: np.ndarray, **answer: bool) -> tuple[float, float]:
    """The network alone's end-point error (px) and bad-2 (%) on the known pixels (``answer``:
    ``self_fuse=True`` for its self-fused answer, every value still the network's)."""
    disparity = api.estimate_disparity(left, right, model=model,
                                       **(answer or {"fuse": False})).disparity[0]
    error = np.abs(disparity.numpy() - truth)[np.isfinite(truth)]
    return float(error.mean()), float(100 * (error > 2).mean())


@pytest.mark.slow
def test_fine_tuning_on_a_real_scene_lowers_the_networks_error_there(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    left, right, truth = _motorcycle(tmp_path / "scenes" / "motorcycle")
    values = yaml.safe_load(CONFIG.read_text())
    values["data"].update(train="real-scenes", real_scenes=str(tmp_path / "scenes"),
                          real_fraction=1.0, height=192, width=256)
    values["train"].update(steps=20, batch_size=2, out_dir=str(tmp_path / "run"),
                           ckpt_every=20)
    config = tmp_path / "finetune.yaml"
    config.write_text(yaml.safe_dump(values))
    tuned_file = tmp_path / "tuned.safetensors"
    torch.manual_seed(0)
    code, _, err = run_cli(["train", str(config), "--export", str(tuned_file)], capsys)
    assert code == 0, err
    bundled, tuned = api.load_model(DEFAULT_STEREO_MODEL), api.load_model(str(tuned_file))
    before, after = (_errors(model, left, right, truth) for model in (bundled, tuned))
    fused_before, fused_after = (_errors(model, left, right, truth, self_fuse=True)
                                 for model in (bundled, tuned))
    with capsys.disabled():
        print(f"network alone on Motorcycle (half size): EPE {before[0]:.3f} -> {after[0]:.3f}"
              f" px, bad-2 {before[1]:.2f} -> {after[1]:.2f} %; self-fused: EPE "
              f"{fused_before[0]:.3f} -> {fused_after[0]:.3f} px, bad-2 {fused_before[1]:.2f} "
              f"-> {fused_after[1]:.2f} %")
    assert after[0] < 0.9 * before[0] and after[1] < before[1]
    assert fused_after[0] < fused_before[0] and fused_after[1] < fused_before[1]
    paths = [str(tmp_path / "scenes" / "motorcycle" / name) for name in ("left.png", "right.png")]
    code, _, err = run_cli(["stereo", *paths, "-o", str(tmp_path / "out"), "--model",
                            str(tuned_file), "--format", "npy"], capsys)
    assert code == 0, err
    assert f"so the model file {tuned_file} changed little" in err
    assert "--no-fuse shows the network's own answer" in err
