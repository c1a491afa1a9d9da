from __future__ import annotations

import json
import os
import re
import signal
from pathlib import Path

import numpy as np
import pytest
import torch
import yaml
from real_scenes import write_real_scenes
from run_lock_holder import hold_lock
from safetensors.torch import load_file, save_file

from cli_runner import run_cli
from crossview.cli.app import main
from crossview.data import io
from crossview.errors import UserError
from crossview.models.matchstereo.bundle import write_bundle
from crossview.models.matchstereo.config import MatchStereoConfig
from crossview.models.matchstereo.model import MatchStereo
from crossview.models.registry import get_spec
from crossview.models.weights import load_weights
from crossview.train.build import build_model
from crossview.train.checkpoint import load_checkpoint
from crossview.train.config import load_config
from crossview.train.logplot import read_log
from crossview.train.trainer import Trainer

MICRO = {
    "task": "stereo",
    "model": {"name": "matchstereo-t",
              "overrides": {"dims": [8, 8, 8, 8], "encoder_depths": [1, 1, 1, 1],
                            "decoder_layers": [1, 1, 1, 1], "radii": [1, 1, 1, 1], "heads": 2,
                            "encoder_head": 0}},
    "data": {"train_size": 4, "val_size": 1, "height": 128, "width": 192},
    "train": {"steps": 2, "batch_size": 1, "val_every": 2, "ckpt_every": 1, "log_every": 1},
}


def cli(argv: list[str]) -> None:
    """Run the CLI in-process; it exits with code 0 on success."""
    with pytest.raises(SystemExit) as done:
        main(argv)
    assert done.value.code == 0


def write_config(tmp_path: Path, values: dict) -> Path:
    path = tmp_path / "config.yaml"
    path.write_text(yaml.safe_dump(values))
    return path


@pytest.mark.slow
def test_train_command_runs_the_real_model_and_resumes(tmp_path: Path) -> None:
    values = {**MICRO, "train": {**MICRO["train"], "out_dir": str(tmp_path / "run")}}
    config = write_config(tmp_path, values)
    cli(["train", str(config)])
    records = read_log(tmp_path / "run" / "log.jsonl")
    assert [r["step"] for r in records["train"]] == [1, 2]
    assert set(records["val"][0]) >= {"epe", "bad2"}
    assert (tmp_path / "run" / "step-00000002.pt").is_file()
    assert (tmp_path / "run" / "best.pt").is_file()
    # resuming a finished run computes nothing more
    cli(["train", str(config), "--resume"])
    assert [r["step"] for r in read_log(tmp_path / "run" / "log.jsonl")["train"]] == [1, 2]
    # export: safetensors + registry description that rebuild the trained model exactly
    out = tmp_path / "weights" / "micro-net.safetensors"
    cli(["train", str(config), "--resume", "--export-only", "--export", str(out)])
    meta = json.loads(out.with_suffix(".json").read_text())
    assert meta["name"] == "micro-net" and meta["task"] == "stereo"
    rebuilt = load_weights(MatchStereo(MatchStereoConfig(
        **{k: tuple(v) if isinstance(v, list) else v for k, v in meta["config"].items()})), out)
    trained = load_checkpoint(tmp_path / "run" / "step-00000002.pt")["model"]
    for key, value in rebuilt.state_dict().items():
        torch.testing.assert_close(value, trained[key], rtol=0, atol=0)


def _overrides(**values: object) -> dict:
    return {"model": {**MICRO["model"], "overrides": {**MICRO["model"]["overrides"], **values}}}


@pytest.mark.parametrize(("values", "message"), [
    ({"train": {"stpes": 3}}, "unknown key 'train.stpes'"),
    ({"optim": {"lr": "fast"}}, "optim.lr must be float"),
    ({"task": "depth"},
     "config: task must be one of 'flow', 'multiview-depth', 'novel-view', 'semantic', "
     "'stereo', got 'depth'"),
    ({"model": {"name": "nope"}}, "unknown model 'nope'"),
    ({"data": {"height": -5}}, "data.height must be >= 1"),
    ({"data": {"val_size": -1}}, "data.val_size must be >= 0"),
    ({"data": {"height": 64, "width": 96}}, "data.height x data.width is 64x96"),
    ({"data": {"height": 200, "width": 256}}, "multiples of 32 and at least 192x192"),
    ({"optim": {"lr": -0.001}}, "config: optim.lr must be > 0, got -0.001"),
    ({"optim": {"lr": float("nan")}}, "config: optim.lr must be a finite number, got nan"),
    ({"optim": {"lr": float("inf")}}, "config: optim.lr must be a finite number, got inf"),
    ({"optim": {"weight_decay": -0.05}}, "config: optim.weight_decay must be >= 0, got -0.05"),
    ({"optim": {"betas": [0.9, 1.0]}}, "config: optim.betas[1] must be in [0, 1), got 1.0"),
    ({"optim": {"betas": [-0.1, 0.99]}}, "config: optim.betas[0] must be in [0, 1), got -0.1"),
    ({"optim": {"betas": [0.9]}}, "config: optim.betas must be a list of 2 values"),
    ({"optim": {"pct_start": 1.5}}, "config: optim.pct_start must be in [0, 1], got 1.5"),
    ({"optim": {"grad_clip": -1}}, "config: optim.grad_clip must be >= 0, got -1.0"),
    ({"loss": {"gamma": 0}}, "config: loss.gamma must be in (0, 1], got 0.0"),
    ({"loss": {"self_weight": -1}}, "config: loss.self_weight must be >= 0, got -1.0"),
    ({"loss": {"noc_threshold": 0}}, "config: loss.noc_threshold must be > 0, got 0.0"),
    ({"loss": {"adl_window": 4}}, "config: loss.adl_window must be >= 1 and odd, got 4"),
    ({"loss": {"adl_alpha": 2}}, "config: loss.adl_alpha must be in [0, 1], got 2.0"),
    ({"loss": {"noc_mask": "yes"}}, "config: loss.noc_mask must be bool, got 'yes'"),
    ({"train": {"seed": -1}}, "config: train.seed must be in [0, 2147483647], got -1"),
    ({"train": {"precision": "fp8"}}, "config: train.precision must be one of 'fp32', "
     "'bf16', 'fp16', got 'fp8'"),
    ({"train": {"batch_size": 0}}, "config: train.batch_size must be >= 1, got 0"),
    ({"train": {"batch_size": 100_000_000}}, "config: training on batches of 100000000 samples "
     "of 192x256 px over 10000 samples needs about "),
    ({"data": {"train_size": 10**15}}, "config: training on batches of 2 samples of 192x256 px "
     "over 1000000000000000 samples needs about "),
    ({"data": {"train": "kitti"}}, "config: data.train is 'kitti', but a stereo run reads "
     "'synthetic-stereo' or 'real-scenes'"),
    (_overrides(heads=0), "config: model.overrides.heads must be >= 1, got 0"),
    (_overrides(heads="two"), "config: model.overrides.heads must be int, got 'two'"),
    (_overrides(heads=3), "config: model.overrides.dims must each divide by heads=3"),
    (_overrides(radii=[1, 1, -1, 1]), "config: model.overrides.radii[2] must be >= 0, got -1"),
    (_overrides(encoder_head=-1), "config: model.overrides.encoder_head must be >= 0, got -1"),
    (_overrides(dims=[0, 8, 8, 8]), "config: model.overrides.dims[0] must be >= 1, got 0"),
    (_overrides(field_scale_init=0), "config: model.overrides.field_scale_init must be > 0"),
    (_overrides(gating=1), "config: model.overrides.gating must be bool, got 1"),
    (_overrides(depth=3), "config: unknown key 'model.overrides.depth'"),
    ({"train": {"device": "meta"}}, "config: train.device 'meta': device type 'meta' holds "
     "no data"),
    ({"train": {"device": "foo"}}, "config: train.device 'foo' is not a device name"),
    pytest.param({"train": {"device": "cuda"}}, "config: train.device 'cuda': CUDA is not "
                 "available", marks=pytest.mark.skipif(torch.cuda.is_available(), reason="CUDA")),
    pytest.param({"train": {"device": "mps"}}, "config: train.device 'mps': MPS (Apple Metal) "
                 "is not available", marks=pytest.mark.skipif(torch.backends.mps.is_available(),
                                                              reason="MPS")),
])
def test_config_mistakes_are_one_line_and_exit_2(tmp_path: Path, values: dict, message: str,
                                                 capsys: pytest.CaptureFixture[str]) -> None:
    values = {**values, "train": {**values.get("train", {}), "out_dir": str(tmp_path / "run")}}
    config = write_config(tmp_path, values)
    with pytest.raises(SystemExit) as done:
        main(["train", str(config)])
    assert done.value.code == 2
    err = capsys.readouterr().err
    assert message in err and "Traceback" not in err
    assert len(err.strip().splitlines()) == 1, err
    assert not (tmp_path / "run").exists()


def test_init_weights_holding_nan_are_refused_naming_the_tensor(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    values = {**MICRO, "train": {**MICRO["train"], "out_dir": str(tmp_path / "run")}}
    config = write_config(tmp_path, values)
    state = build_model(load_config(config)).state_dict()
    state["encoder.downsample_layers.0.0.weight"][0, 0, 0, 0] = float("inf")
    weights = tmp_path / "diverged.safetensors"
    save_file(state, weights)
    with pytest.raises(SystemExit) as done:
        main(["train", str(config), "--init-weights", str(weights)])
    err = capsys.readouterr().err
    assert done.value.code == 2 and len(err.strip().splitlines()) == 1, err
    assert err.startswith(f"error: {weights}: tensor 'encoder.downsample_layers.0.0.weight' "
                          "holds NaN or infinite values")
    assert not (tmp_path / "run").exists()


def test_a_second_run_into_one_out_dir_is_refused_naming_the_first(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    (run_dir / "log.jsonl").write_text("the first run's log\n")
    first = hold_lock(run_dir)
    try:
        config = write_config(tmp_path, {**MICRO, "train": {**MICRO["train"],
                                                            "out_dir": str(run_dir)}})
        err = _fails_with_one_line(["train", str(config)], capsys)
    finally:
        first.kill()
        first.wait()
    assert err == (f"error: {run_dir} is in use by another training run (process {first.pid}); "
                   "wait for it to end, or give another train.out_dir (--out-dir)")
    assert [p.name for p in run_dir.iterdir()] == ["log.jsonl"]
    assert (run_dir / "log.jsonl").read_text() == "the first run's log\n"


def test_missing_config_file(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as done:
        main(["train", str(tmp_path / "absent.yaml")])
    assert done.value.code == 2
    assert "config file not found" in capsys.readouterr().err


def test_plot_log_draws_a_png_and_keeps_the_last_record_per_step(tmp_path: Path) -> None:
    log = tmp_path / "log.jsonl"
    rows = [{"kind": "train", "step": s, "loss": 10.0 / s, "init": 1.0, "self": 5.0 / s,
             "cross": 4.0 / s, "lr": 1e-3} for s in (1, 2, 3)]
    rows.append({"kind": "train", "step": 2, "loss": 4.0, "init": 1.0, "self": 2.0,
                 "cross": 1.0, "lr": 1e-3})  # recomputed after a resume
    rows.append({"kind": "val", "step": 3, "epe": 2.5, "bad2": 30.0})
    log.write_text("\n".join(json.dumps(r) for r in rows) + "\n")
    assert [r["loss"] for r in read_log(log)["train"]] == [10.0, 4.0, 10.0 / 3]
    cli(["plot-log", str(tmp_path), "-o", str(tmp_path / "curves.png")])
    assert (tmp_path / "curves.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert not list(tmp_path.glob(".*tmp*"))


def _fails_with_one_line(argv: list[str], capsys: pytest.CaptureFixture[str]) -> str:
    with pytest.raises(SystemExit) as done:
        main(argv)
    err = capsys.readouterr().err.strip()
    assert done.value.code == 2
    assert err.startswith("error: ") and len(err.splitlines()) == 1, err
    return err


def _laughs(levels: int) -> str:
    """A "billion laughs" file: each level's list holds nine aliases of the one before."""
    lines = ['a0: &a0 ["lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol"]']
    lines += [f"a{i}: &a{i} [{', '.join([f'*a{i - 1}'] * 9)}]" for i in range(1, levels)]
    return "\n".join(lines) + f"\ntrain: {{out_dir: *a{levels - 1}}}\n"


@pytest.mark.parametrize(("text", "message"), [
    (_laughs(9), "anchors and aliases (& and *) are not allowed in a configuration (line 1, "
                 "column 5)"),
    ("task: &t stereo\n", "anchors and aliases (& and *) are not allowed in a configuration "
                          "(line 1, column 7)"),
    ("train: " + "[" * 3000 + "]" * 3000 + "\n", "nested deeper than 32 levels (line 1, "
                                                 "column 39)"),
    ("train:\n  steps: " + "9" * 5001 + "\n", "a number written with 5001 characters (at "
                                               "most 100) (line 2, column 10)"),
    ("optim:\n  lr: 0." + "1" * 200 + "\n", "a number written with 202 characters (at most "
                                             "100) (line 2, column 7)"),
    ("train:\n  steps: 3\n  log_every: 1\n  steps: 5\n", "duplicate key 'steps' (first on "
                                                          "line 2) (line 4, column 3)"),
    ("train: {steps: 3, steps: 5}\n", "duplicate key 'steps' (first on line 1) (line 1, "
                                      "column 19)"),
    ("task: stereo\ntrain: {}\ntask: flow\n", "duplicate key 'task' (first on line 1) (line "
                                             "3, column 1)"),
], ids=["billion laughs", "unused anchor", "3000 brackets", "5001 digits", "long float",
        "duplicate key", "duplicate in a flow mapping", "duplicate section"])
def test_yaml_a_configuration_refuses_is_one_line_naming_its_line(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], text: str, message: str) -> None:
    config = tmp_path / "config.yaml"
    config.write_text(text)
    err = _fails_with_one_line(["train", str(config), "--out-dir", str(tmp_path / "run")],
                               capsys)
    assert err == f"error: config file {config}: {message}"
    assert not (tmp_path / "run").exists()


def test_a_huge_value_is_quoted_short(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    config = write_config(tmp_path, {"data": {"real": ["x" * 200] * 10_000}})
    err = _fails_with_one_line(["train", str(config), "--out-dir", str(tmp_path / "run")],
                               capsys)
    assert err.startswith("error: config: data.real must be str, got ['xxx") and len(err) < 150


def test_invalid_yaml_is_one_line_with_its_place(tmp_path: Path,
                                                 capsys: pytest.CaptureFixture[str]) -> None:
    config = tmp_path / "config.yaml"
    config.write_text("task: stereo\ntrain: {steps: 1\n  bad: [\n")
    err = _fails_with_one_line(["train", str(config)], capsys)
    assert "is not valid YAML" in err and "line 3" in err


def test_zero_steps_is_refused(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    config = write_config(tmp_path, {**MICRO, "train": {"out_dir": str(tmp_path / "run")}})
    with pytest.raises(SystemExit) as done:
        main(["train", str(config), "--steps", "0"])
    assert done.value.code == 2 and "Traceback" not in capsys.readouterr().err
    assert not (tmp_path / "run").exists()


@pytest.mark.parametrize(("extra", "message"), [
    (["--out-dir", "{tmp}/blocker/run"], "blocker: exists and is not a directory"),
    (["--out-dir", "/proc/crossview-run"], "cannot write to this output directory"),
    (["--export", "{tmp}/weights"], "export path must end in .safetensors"),
    (["--export", "{tmp}/blocker/w.safetensors"], "blocker: exists and is not a directory"),
])
def test_output_mistakes_fail_before_training(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                              extra: list[str], message: str) -> None:
    (tmp_path / "blocker").write_text("a file")
    config = write_config(tmp_path, {**MICRO, "train": {**MICRO["train"],
                                                        "out_dir": str(tmp_path / "run")}})
    err = _fails_with_one_line(["train", str(config), *(a.format(tmp=tmp_path) for a in extra)],
                               capsys)
    assert message in err
    assert not (tmp_path / "run").exists()  # nothing was trained


@pytest.mark.parametrize("taken", ["weights/w.json", "run/log.jsonl", "run/best.pt"])
def test_an_output_name_taken_by_a_directory_fails_before_training(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch,
        taken: str) -> None:
    monkeypatch.setattr(Trainer, "__init__", lambda *a, **k: pytest.fail("training started"))
    (tmp_path / taken).mkdir(parents=True)
    config = write_config(tmp_path, {**MICRO, "train": {**MICRO["train"],
                                                        "out_dir": str(tmp_path / "run")}})
    err = _fails_with_one_line(["train", str(config), "--export",
                                str(tmp_path / "weights" / "w.safetensors")], capsys)
    assert err == f"error: {tmp_path / taken}: is a directory; cannot write an output file of " \
                  "that name"
    assert sorted(str(p.relative_to(tmp_path)) for p in tmp_path.rglob("*")) == sorted(
        ["config.yaml", taken, taken.split("/")[0]])


@pytest.mark.parametrize(("content", "message"), [
    ('{"kind": "train", "lr": 1}\n', "log.jsonl:1 is not a log record"),
    ('[1, 2]\n', "log.jsonl:1 is not a log record"),
    ('{"kind": "train", "step": "x"}\n', "log.jsonl:1 is not a log record"),
    (b"\x89PNG\r\n\x1a\n\xff", "is not a text file"),
])
def test_plot_log_refuses_what_is_not_a_log(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                            content: str | bytes, message: str) -> None:
    log = tmp_path / "log.jsonl"
    log.write_bytes(content if isinstance(content, bytes) else content.encode())
    err = _fails_with_one_line(["plot-log", str(log), "-o", str(tmp_path / "c.png")], capsys)
    assert message in err
    assert not (tmp_path / "c.png").exists()


def test_plot_log_output_mistakes_and_a_log_without_validation(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    log = tmp_path / "log.jsonl"
    log.write_text('{"kind": "train", "step": 1, "loss": 2.0}\n')  # no lr, no validation yet
    (tmp_path / "taken").mkdir()
    err = _fails_with_one_line(["plot-log", str(log), "-o", str(tmp_path / "taken")], capsys)
    assert "is a directory" in err
    _fails_with_one_line(["plot-log", str(log), "-o", "/proc/crossview/c.png"], capsys)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["log.jsonl", "taken"]
    cli(["plot-log", str(log), "-o", str(tmp_path / "c.png")])
    assert capsys.readouterr().err == ""  # no matplotlib warning about an empty legend
    assert (tmp_path / "c.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def _run_with_checkpoint(tmp_path: Path) -> tuple[Path, Path]:
    """A MICRO config and the intact step-0 checkpoint of its run (no training needed)."""
    from crossview.train.config import load_config

    config = write_config(tmp_path, {**MICRO, "train": {**MICRO["train"],
                                                        "out_dir": str(tmp_path / "run")}})
    trainer = Trainer(load_config(config), progress=False)
    try:
        return config, trainer.save()
    finally:
        trainer.close()  # a trainer that never runs releases the run's lock itself


def test_resume_sets_an_unreadable_newest_checkpoint_aside(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    config, intact = _run_with_checkpoint(tmp_path)
    newest = intact.with_name("step-00000002.pt")
    newest.write_bytes(intact.read_bytes()[:4000])  # a copy cut short
    out = tmp_path / "w.safetensors"
    cli(["train", str(config), "--resume", "--export-only", "--export", str(out)])
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith(
        f"warning: --resume: {newest}: cannot read checkpoint (truncated or corrupt: "), err
    assert err.endswith("); renamed to step-00000002.pt.unreadable; resuming from "
                        "step-00000000.pt (step 0)\n"), err
    assert sorted(p.name for p in intact.parent.glob("step-*")) == [
        "step-00000000.pt", "step-00000002.pt.unreadable"]
    exported = load_weights(MatchStereo(MatchStereoConfig(**{
        k: tuple(v) if isinstance(v, list) else v
        for k, v in json.loads(out.with_suffix(".json").read_text())["config"].items()})), out)
    for key, value in load_checkpoint(intact)["model"].items():
        torch.testing.assert_close(exported.state_dict()[key], value, rtol=0, atol=0)


@pytest.mark.parametrize(("kind", "message"), [
    ("truncated", "cannot read checkpoint (truncated or corrupt: "),
    ("text", "cannot read checkpoint (not a PyTorch checkpoint)"),
    ("objects", "cannot read checkpoint (it holds pickled Python objects other than tensors"),
    ("weights", "not a crossview training checkpoint (no 'optimizer', 'scheduler', 'scaler')"),
])
def test_resume_without_a_usable_checkpoint_is_one_line(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], kind: str, message: str) -> None:
    config, intact = _run_with_checkpoint(tmp_path)
    if kind == "truncated":
        intact.write_bytes(intact.read_bytes()[:-3000])
    elif kind == "text":
        intact.write_text("not a checkpoint\n")
    elif kind == "objects":
        torch.save({"model": {}, "args": Path("x")}, intact)
    else:
        torch.save({"model": load_checkpoint(intact)["model"]}, intact)
    err = _fails_with_one_line(["train", str(config), "--resume"], capsys)
    assert err.startswith(f"error: --resume: {intact}: {message}"), err
    assert err.endswith(f"; no usable checkpoint left in {intact.parent}")
    assert [p.name for p in intact.parent.glob("step-*")] == [intact.name]  # left as it was


@pytest.mark.parametrize(("stop", "exit_code"), [(signal.SIGINT, 130), (signal.SIGTERM, 143)])
def test_a_run_stopped_early_writes_no_export_and_says_how_to_go_on(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str],
        stop: signal.Signals, exit_code: int) -> None:
    """Ctrl-C (SIGINT) or SIGTERM during step 1: the step's checkpoint is written, the run
    says how to go on and exits as the other commands do (128 + the signal)."""
    config = write_config(tmp_path, {**MICRO, "train": {**MICRO["train"], "steps": 3}})
    run_step = Trainer.train_step

    def step_then_interrupt(self: Trainer, batch: dict | None = None) -> dict[str, float]:
        logs = run_step(self, batch)
        os.kill(os.getpid(), stop)
        return logs

    monkeypatch.setattr(Trainer, "train_step", step_then_interrupt)
    out = tmp_path / "w.safetensors"
    code, said, _ = run_cli(["train", str(config), "--out-dir", str(tmp_path / "run"),
                             "--export", str(out)], capsys)
    assert code == exit_code
    said = " ".join(said.split())
    assert not out.exists() and not out.with_suffix(".json").exists()
    assert sorted(p.name for p in (tmp_path / "run").glob("step-*")) == ["step-00000001.pt"]
    again = f"crossview train {config} --resume --out-dir {tmp_path / 'run'}"
    assert (f"stopped early at step 1: continue with `{again}`; {out} was not written "
            f"(export this state with `{again} --export-only --export {out}`)") in said, said


def test_resuming_a_finished_run_says_so_and_a_larger_step_count_trains_it_on(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    run_dir = tmp_path / "run"
    config = write_config(tmp_path, {**MICRO, "train": {**MICRO["train"],
                                                         "out_dir": str(run_dir)}})
    cli(["train", str(config)])
    capsys.readouterr()
    code, out, err = run_cli(["train", str(config), "--resume"], capsys)
    assert code == 0 and err == "", err
    assert " ".join(out.split()) == (
        f"the run in {run_dir} finished at step 2 of 2: nothing to train; to train it on, raise "
        f"the step count: `crossview train {config} --resume --steps N` with N > 2 (or "
        f"train.steps in {config})")
    code, out, err = run_cli(["train", str(config), "--resume", "--steps", "3"], capsys)
    assert code == 0, err
    assert err.startswith("note: --resume: the run finished at step 2; training on to step 3 "
                          "with the one-cycle learning-rate schedule over the 1 added step\n")
    assert "step 3 of 3; loss " in out and "nan" not in out, out
    assert [r["step"] for r in read_log(run_dir / "log.jsonl")["train"]] == [1, 2, 3]
    assert load_checkpoint(run_dir / "step-00000003.pt")["schedule_start"] == 2


def test_the_log_and_the_progress_lines_hold_the_first_last_and_stopped_steps(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    """With log_every above the steps run, log.jsonl still gets the first step of a run and
    the last one it reaches: stopped by Ctrl-C after step 2, resumed to the end (5), and
    ended by an error after step 2; off a terminal each logged step is a progress line."""
    values = {**MICRO, "train": {**MICRO["train"], "steps": 5, "log_every": 10,
                                 "val_every": 10}}
    config = write_config(tmp_path, values)
    run_dir = tmp_path / "run"
    run_step = Trainer.train_step

    def interrupt_after_step_2(self: Trainer, batch: dict | None = None) -> dict[str, float]:
        logs = run_step(self, batch)
        if self.step == 2:
            os.kill(os.getpid(), signal.SIGINT)
        return logs

    monkeypatch.setattr(Trainer, "train_step", interrupt_after_step_2)
    code, _, err = run_cli(["train", str(config), "--out-dir", str(run_dir)], capsys)
    assert code == 130
    assert [r["step"] for r in read_log(run_dir / "log.jsonl")["train"]] == [1, 2]
    progress = [line for line in err.splitlines() if line.startswith("step ")]
    assert len(progress) == 2, err
    for step, line in zip((1, 2), progress, strict=True):
        assert re.fullmatch(rf"step {step}/5: loss \S+ lr \S+ \(\d+\.\d s\)", line), err
    monkeypatch.setattr(Trainer, "train_step", run_step)
    code, _, err = run_cli(["train", str(config), "--out-dir", str(run_dir), "--resume"],
                           capsys)
    assert code == 0, err
    assert [r["step"] for r in read_log(run_dir / "log.jsonl")["train"]] == [1, 2, 3, 5]
    assert [line.split(":")[0] for line in err.splitlines() if line.startswith("step ")] == [
        "step 3/5", "step 5/5"], err

    def fail_at_step_3(self: Trainer, batch: dict | None = None) -> dict[str, float]:
        if self.step == 2:
            raise UserError("stopping at step 3: the loss diverged")
        return run_step(self, batch)

    monkeypatch.setattr(Trainer, "train_step", fail_at_step_3)
    code, _, err = run_cli(["train", str(config), "--out-dir", str(tmp_path / "failed")],
                           capsys)
    assert code == 2 and err.splitlines()[-1] == "error: stopping at step 3: the loss diverged"
    assert [r["step"] for r in read_log(tmp_path / "failed" / "log.jsonl")["train"]] == [1, 2]


@pytest.mark.slow
def test_init_weights_takes_a_model_name_and_refuses_names_it_does_not_know(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """--init-weights matchstereo-mini starts from the bundled weights (a learning rate of
    1e-12 leaves them as they were after a step); an unknown name, or a model without
    weights, is one line before anything trains."""
    values = {"task": "stereo", "model": {"name": "matchstereo-mini"},
              "data": {"train_size": 2, "val_size": 0, "height": 128, "width": 160},
              "optim": {"lr": 1e-12}, "train": {"steps": 1, "batch_size": 1}}
    config = write_config(tmp_path, values)
    code, _, err = run_cli(["train", str(config), "--out-dir", str(tmp_path / "run"),
                            "--init-weights", "matchstereo-mini"], capsys)
    assert code == 0, err
    bundled = load_file(get_spec("matchstereo-mini").weights_path)
    trained = load_checkpoint(tmp_path / "run" / "step-00000001.pt")["model"]
    for key, value in bundled.items():
        torch.testing.assert_close(trained[key], value, rtol=0, atol=1e-6)
    for name, message in (
            ("nope", "error: --init-weights nope: no such file, and no model of that name "
                     "(`crossview models` lists the names)"),
            ("multiview", "error: --init-weights multiview: model 'multiview' has no weights "
                          "(neither bundled nor published)")):
        code, out, err = run_cli(["train", str(config), "--out-dir", str(tmp_path / name),
                                  "--init-weights", name], capsys)
        assert code == 2 and out == "" and err == message + "\n", err
        assert not list((tmp_path / name).glob("step-*"))


def test_an_exported_model_runs_with_the_model_option_the_export_prints(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """--export prints the command that runs the exported model; `crossview stereo --model
    FILE` then runs the trained weights (its disparities differ from those of the same network
    untrained), and so does `crossview eval --model FILE`."""
    config = write_config(tmp_path, {**MICRO, "optim": {"lr": 1e-2}})
    out = tmp_path / "weights" / "micro-net.safetensors"
    code, said, err = run_cli(["train", str(config), "--out-dir", str(tmp_path / "run"),
                               "--export", str(out)], capsys)
    assert code == 0, err
    command = f"crossview stereo LEFT RIGHT --model {out}"
    assert f"use it: {command}\n" in said, said
    torch.manual_seed(0)  # the trainer's seed: the network it started from
    untrained = tmp_path / "untrained.safetensors"
    write_bundle(build_model(load_config(config)), untrained, name="untrained", task="stereo")
    rng = np.random.default_rng(0)
    left = rng.integers(0, 256, (192, 192, 3), dtype=np.uint8)
    io.write_image(tmp_path / "l.png", left)
    io.write_image(tmp_path / "r.png", np.roll(left, -3, axis=1))
    disparities = []
    for model in (out, untrained):
        args = command.split()[1:]
        args[1:3] = [str(tmp_path / "l.png"), str(tmp_path / "r.png")]
        args[-1] = str(model)
        code, _, err = run_cli([*args, "-o", str(tmp_path / model.stem), "--format", "npy"],
                               capsys)
        assert code == 0, err
        disparities.append(io.read_npy(tmp_path / model.stem / "l_disp.npy"))
    assert not np.allclose(*disparities)
    scenes = write_real_scenes(tmp_path / "scenes", count=1, size=(192, 192))
    code, said, err = run_cli(["eval", "--model", str(out), "--dataset", f"scenes:{scenes}"],
                              capsys)
    assert code == 0 and "s0" in said, err
    (tmp_path / "notes.txt").write_text("not a model")
    code, _, err = run_cli(["stereo", str(tmp_path / "l.png"), str(tmp_path / "r.png"),
                            "--model", str(tmp_path / "notes.txt")], capsys)
    assert code == 2 and err == (
        f"error: {tmp_path / 'notes.txt'}: not a model file (a NAME.safetensors that `crossview "
        "train --export` wrote, its NAME.json beside it); a weights file of a registered model "
        "goes with --weights\n"), err
