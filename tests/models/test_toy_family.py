"""A new dense family touches no other file: a toy stereo network, registered here, runs through
``crossview.estimate_disparity``, ``crossview stereo``, ``crossview eval``, ``crossview train``
(with a resume) and ``crossview export onnx``, relying only on the contract of
:mod:`crossview.models.dense.contract` (see docs/conventions.md, "Adding a model family")."""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pytest
import torch
import torch.nn.functional as F
import yaml
from safetensors.torch import save_file
from torch import nn

from cli_runner import run_cli
from crossview import estimate_disparity
from crossview.data import io
from crossview.errors import UserError
from crossview.models import registry
from crossview.models.dense.inference import dense_predictor
from crossview.models.registry import ModelSpec, configured
from crossview.settings import setting
from crossview.train.logplot import read_log

SHIFT = 3  # px: the right image is the left one moved this far left


@dataclass(frozen=True)
class ToyConfig:
    max_disparity: int = setting(8, low=1)


class ToyStereo(nn.Module):
    """Disparity by a correlation volume of the images' (learnable, identity-initialised)
    features over ``max_disparity`` candidates and a soft-argmin."""

    def __init__(self, config: ToyConfig) -> None:
        super().__init__()
        self.max_disparity = config.max_disparity
        self.features = nn.Conv2d(3, 3, 3, padding=1)
        nn.init.dirac_(self.features.weight)
        nn.init.zeros_(self.features.bias)
        self.sharpness = nn.Parameter(torch.tensor(50.0))

    def min_shape(self, task: str) -> tuple[int, int]:
        return 32, 32

    def forward_fields(self, img0: torch.Tensor, img1: torch.Tensor, *, task: str
                       ) -> dict[str, torch.Tensor]:
        """Images ``[B, 3, H, W]`` 0..255 -> ``{"field": [2B, H, W, 2]}``, left rows first."""
        f0, f1 = (self.features(x / 127.5 - 1) for x in (img0, img1))
        left = self._disparity(f0, f1, lambda f, d: F.pad(f, (d, 0))[..., : f.shape[-1]])
        right = self._disparity(f1, f0, lambda f, d: F.pad(f, (0, d))[..., d:])
        zeros = torch.zeros_like(left)
        return {"field": torch.cat([torch.stack([-left, zeros], -1),
                                    torch.stack([right, zeros], -1)])}

    def _disparity(self, ref: torch.Tensor, other: torch.Tensor, shift) -> torch.Tensor:
        """Soft-argmin ``[B, H, W]`` of ``-|ref - other moved by d|`` over ``d``."""
        cost = torch.stack([-(ref - shift(other, d)).abs().mean(1)
                            for d in range(self.max_disparity)], 1)
        candidates = torch.arange(self.max_disparity, dtype=ref.dtype, device=ref.device)
        return (torch.softmax(self.sharpness * cost, 1) * candidates[:, None, None]).sum(1)


@pytest.fixture
def toystereo(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> str:
    """``toystereo`` registered (for this test only) with weights written to a file."""
    weights = tmp_path / "toystereo.safetensors"
    save_file(ToyStereo(ToyConfig()).state_dict(), str(weights))
    spec = ModelSpec("toystereo", configured(ToyConfig(), ToyStereo), "stereo",
                     weights=str(weights), description="a toy stereo network",
                     predictor=dense_predictor)
    monkeypatch.setitem(registry.MODELS.entries, spec.name, spec)
    return spec.name


def _pair(rng: np.random.Generator, height: int = 48, width: int = 80
          ) -> tuple[np.ndarray, np.ndarray]:
    left = rng.integers(0, 256, (height, width, 3), dtype=np.uint8)
    return left, np.roll(left, -SHIFT, axis=1)


def _inside(disparity: np.ndarray) -> np.ndarray:
    """The pixels whose match lies inside the right image, away from the wrapped border."""
    return disparity[2:-2, SHIFT + 8: -8]


def test_estimate_disparity_runs_the_toy_family(toystereo: str) -> None:
    left, right = _pair(np.random.default_rng(0))
    result = estimate_disparity(left, right, model=toystereo)
    assert result.disparity.shape == (1, *left.shape[:2])
    assert np.median(_inside(result.disparity[0].numpy())) == pytest.approx(SHIFT, abs=0.1)
    assert result.self_rpos.abs().max() == 0  # no self attention: each pixel from itself
    assert result.confidence.shape == result.disparity.shape


def test_the_toy_family_refuses_lri(toystereo: str) -> None:
    left, right = _pair(np.random.default_rng(0))
    with pytest.raises(UserError, match="'toystereo' has no low-resolution initialisation"):
        estimate_disparity(left, right, model=toystereo, lri=True)


def test_crossview_stereo_runs_the_toy_family(toystereo: str, tmp_path: Path,
                                              capsys: pytest.CaptureFixture[str]) -> None:
    left, right = _pair(np.random.default_rng(1))
    io.write_image(tmp_path / "left.png", left)
    io.write_image(tmp_path / "right.png", right)
    code, _, err = run_cli(["stereo", str(tmp_path / "left.png"), str(tmp_path / "right.png"),
                              "--model", toystereo, "-o", str(tmp_path / "out"), "--format",
                              "npy"], capsys)
    assert code == 0, err
    disparity = np.load(tmp_path / "out" / "left_disp.npy")
    assert np.median(_inside(disparity)) == pytest.approx(SHIFT, abs=0.1)


def test_crossview_eval_scores_the_toy_family(toystereo: str, tmp_path: Path,
                                              capsys: pytest.CaptureFixture[str]) -> None:
    left, right = _pair(np.random.default_rng(2))
    scene = tmp_path / "scenes" / "toy"
    scene.mkdir(parents=True)
    io.write_image(scene / "left.png", left)
    io.write_image(scene / "right.png", right)
    truth = np.full(left.shape[:2], np.nan, np.float32)
    truth[2:-2, SHIFT + 8: -8] = SHIFT
    io.write_npy(scene / "gt.npy", truth)
    out = tmp_path / "eval.json"
    code, _, err = run_cli(["eval", "--model", toystereo, "--dataset",
                            f"scenes:{tmp_path / 'scenes'}", "--json", str(out)], capsys)
    assert code == 0, err
    row = yaml.safe_load(out.read_text())["per_sample"][0]
    assert row["name"] == "toy"
    assert row["epe_holes"] < 0.1


def test_crossview_train_trains_and_resumes_the_toy_family(toystereo: str, tmp_path: Path,
                                                           capsys: pytest.CaptureFixture[str]
                                                           ) -> None:
    config = tmp_path / "toy.yaml"
    config.write_text(yaml.safe_dump({
        "task": "stereo", "model": {"name": toystereo, "overrides": {"max_disparity": 6}},
        "loss": {"init_weight": 0.0, "cross_weight": 0.0},
        "data": {"train_size": 4, "val_size": 1, "height": 64, "width": 96},
        "train": {"steps": 2, "batch_size": 1, "val_every": 2, "ckpt_every": 1,
                  "log_every": 1, "out_dir": str(tmp_path / "run")}}))
    code, _, err = run_cli(["train", str(config), "--steps", "1"], capsys)
    assert code == 0, err
    code, _, err = run_cli(["train", str(config), "--resume"], capsys)
    assert code == 0, err
    records = read_log(tmp_path / "run" / "log.jsonl")
    assert [r["step"] for r in records["train"]] == [1, 2]
    assert "epe" in records["val"][0]
    state = torch.load(tmp_path / "run" / "step-00000002.pt", weights_only=True)["model"]
    assert set(state) == {"features.weight", "features.bias", "sharpness"}


def test_crossview_train_names_a_loss_term_the_toy_family_cannot_feed(
        toystereo: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    config = tmp_path / "toy.yaml"
    config.write_text(yaml.safe_dump({
        "task": "stereo", "model": {"name": toystereo},
        "data": {"train_size": 2, "val_size": 0, "height": 64, "width": 96},
        "train": {"steps": 1, "batch_size": 1, "out_dir": str(tmp_path / "run")}}))
    code, _, err = run_cli(["train", str(config)], capsys)
    assert code == 2
    assert "error: config: loss.init_weight needs the network's init_field output" in err
    assert "Traceback" not in err


def test_crossview_export_onnx_exports_the_toy_family(toystereo: str, tmp_path: Path,
                                                      capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "toy.onnx"
    code, printed, err = run_cli(["export", "onnx", "--model", toystereo, "--size", "64x96",
                                  "-o", str(out)], capsys)
    assert code == 0, err
    assert out.is_file()
    # the export's own check: onnxruntime against crossview's answer for the same settings
    difference = re.search(r"disparity mean ([^ ;]+) max ([^ ;]+)", printed)
    assert difference is not None, printed
    assert float(difference[2]) < 1e-3
