"""``configs/finetune-stereo.yaml``: the default stereo model fine-tuned on a folder of the
user's own scenes, the model named (not described) by the config."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml
from real_scenes import write_real_scenes

from cli_runner import run_cli
from crossview import api
from crossview.defaults import DEFAULT_STEREO_MODEL
from crossview.train.logplot import read_log

CONFIG = Path(__file__).resolve().parents[2] / "configs" / "finetune-stereo.yaml"


def test_the_config_names_the_default_model_and_wants_the_scenes_folder(
        tmp_path: Path, capsys: pytest.CaptureFixture[str],
        monkeypatch: pytest.MonkeyPatch) -> None:
    values = yaml.safe_load(CONFIG.read_text())
    assert values["model"] == {"name": DEFAULT_STEREO_MODEL, "init_weights": DEFAULT_STEREO_MODEL}
    monkeypatch.chdir(tmp_path)  # no my-scenes folder here
    code, out, err = run_cli(["train", str(CONFIG)], capsys)
    assert code == 2 and out == "" and err.startswith("error: ") and "my-scenes" in err, err
    assert len(err.splitlines()) == 1, err


@pytest.mark.slow
def test_two_steps_on_a_scenes_folder_tune_the_default_model(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Two steps on a tiny crop of two scenes: the export runs with --model, starts from the
    default's weights (a learning rate of 1e-4 moves them little) and keeps its inference
    defaults (fusion, refinement, low-resolution initialisation)."""
    values = yaml.safe_load(CONFIG.read_text())
    scenes = write_real_scenes(tmp_path / "my-scenes", count=2, size=(160, 224))
    values["data"].update(real_scenes=str(scenes), height=128, width=160)
    values["train"].update(steps=2, batch_size=1, out_dir=str(tmp_path / "run"))
    config = tmp_path / "finetune.yaml"
    config.write_text(yaml.safe_dump(values))
    out = tmp_path / "my-stereo.safetensors"
    code, said, err = run_cli(["train", str(config), "--export", str(out)], capsys)
    assert code == 0, err
    assert f"use it: crossview stereo LEFT RIGHT --model {out}" in said, said
    assert [r["step"] for r in read_log(tmp_path / "run" / "log.jsonl")["train"]] == [1, 2]
    tuned, default = api.load_model(str(out)), api.load_model(DEFAULT_STEREO_MODEL)
    for flag in ("refine_by_default", "lri_by_default", "fuse_by_default", "fused_network"):
        assert getattr(tuned, flag) == getattr(default, flag), flag
    moved = max(float((tuned.state_dict()[key] - value).abs().max())
                for key, value in default.state_dict().items())
    assert 0 < moved < 1e-2
