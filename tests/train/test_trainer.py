from __future__ import annotations

import json
import math
import os
import signal
import socket
import subprocess
import sys
import textwrap
from collections.abc import Callable
from pathlib import Path

import pytest
import torch
from train_standin import StandInModel, StandInStereo

from crossview.errors import UserError
from crossview.models.matchstereo import MatchStereo, MatchStereoConfig
from crossview.train.checkpoint import latest_checkpoint, load_checkpoint, step_checkpoints
from crossview.train.config import config_from_dict
from crossview.train.recipes.fields import collate
from crossview.train.trainer import Trainer, batch_indices
from hang_guard import HANG_GUARD_SECONDS

HERE = Path(__file__).parent


def make_cfg(out_dir: Path, **train) -> object:
    values = {"train": {"steps": 6, "batch_size": 2, "out_dir": str(out_dir), "log_every": 1,
                        "val_every": 3, "ckpt_every": 2, "keep_last": 2, **train},
              "optim": {"lr": 1e-2, "pct_start": 0.3}}
    return config_from_dict(values)


def run(cfg, resume: bool = False, stop_after: int | None = None, train_set=None, **kwargs):
    torch.manual_seed(0)
    model = StandInModel()
    trainer = Trainer(cfg, model=model, train_set=train_set or StandInStereo(),
                      val_set=StandInStereo(4), resume=resume, progress=False,
                      on_step=(lambda step, logs: step == stop_after), **kwargs)
    summary = trainer.run()
    return trainer, summary


def params(model: torch.nn.Module) -> dict[str, torch.Tensor]:
    return {k: v.detach().clone() for k, v in model.state_dict().items()}


class TestBatchOrder:
    def test_each_epoch_is_a_permutation(self) -> None:
        seen = [i for step in range(4) for i in batch_indices(step, 3, 12, seed=5)]
        assert sorted(seen) == list(range(12))
        second = [i for step in range(4, 8) for i in batch_indices(step, 3, 12, seed=5)]
        assert sorted(second) == list(range(12)) and second != seen

    def test_deterministic_and_seeded(self) -> None:
        assert batch_indices(7, 4, 10, 1) == batch_indices(7, 4, 10, 1)
        assert batch_indices(0, 10, 10, 1) != batch_indices(0, 10, 10, 2)

    def test_collate_orders_both_views(self) -> None:
        a = {"img0": torch.zeros(3, 2, 2), "img1": torch.zeros(3, 2, 2),
             "gt": torch.stack([torch.full((2, 2, 2), 1.0), torch.full((2, 2, 2), 2.0)]),
             "valid": torch.ones(2, 2, 2, dtype=torch.bool)}
        b = {**a, "gt": a["gt"] + 10}
        batch = collate([a, b])
        assert batch["gt"].shape == (4, 2, 2, 2)
        assert batch["gt"][:, 0, 0, 0].tolist() == [1.0, 11.0, 2.0, 12.0]


class TestTrainer:
    def test_loss_decreases_and_files_are_written(self, tmp_path: Path) -> None:
        cfg = make_cfg(tmp_path, steps=12, ckpt_every=4, val_every=4)
        _, summary = run(cfg)
        assert summary["step"] == 12
        records = [json.loads(line) for line in (tmp_path / "log.jsonl").read_text().splitlines()]
        train = [r for r in records if r["kind"] == "train"]
        val = [r for r in records if r["kind"] == "val"]
        assert [r["step"] for r in train] == list(range(1, 13))
        assert [r["step"] for r in val] == [4, 8, 12]
        assert {"loss", "init", "self", "cross", "lr", "grad_norm"} <= set(train[0])
        assert {"epe", "bad2"} <= set(val[0])
        assert sum(r["loss"] for r in train[-3:]) < sum(r["loss"] for r in train[:3])
        assert [p.name for p in step_checkpoints(tmp_path)] == ["step-00000008.pt",
                                                                "step-00000012.pt"]
        best = load_checkpoint(tmp_path / "best.pt")
        assert best["best_metric"] == min(r["epe"] for r in val)

    def test_resume_continues_as_if_never_stopped(self, tmp_path: Path) -> None:
        straight, _ = run(make_cfg(tmp_path / "a"))
        _, summary = run(make_cfg(tmp_path / "b"), stop_after=3)
        assert summary["step"] == 3 and latest_checkpoint(tmp_path / "b").name.endswith("3.pt")
        resumed, summary = run(make_cfg(tmp_path / "b"), resume=True)
        assert summary["steps_run"] == 3
        for key, value in params(straight.model).items():
            torch.testing.assert_close(params(resumed.model)[key], value, rtol=0, atol=0)

    def test_sample_making_workers_give_the_same_run(self, tmp_path: Path) -> None:
        # train.workers only moves sample making into other processes: the batches, and so
        # every logged loss and the weights, are those of the run that makes them itself
        here, _ = run(make_cfg(tmp_path / "here"))
        ahead, summary = run(make_cfg(tmp_path / "ahead", workers=2))
        assert summary["step"] == 6
        losses = [[r["loss"] for r in map(json.loads, (d / "log.jsonl").read_text().splitlines())
                   if r["kind"] == "train"] for d in (tmp_path / "here", tmp_path / "ahead")]
        assert losses[0] == losses[1] and len(losses[0]) == 6
        for key, value in params(here.model).items():
            assert torch.equal(value, params(ahead.model)[key]), key

    def test_sample_making_workers_resume_where_the_run_stopped(self, tmp_path: Path) -> None:
        whole, _ = run(make_cfg(tmp_path / "whole", workers=1))
        run(make_cfg(tmp_path / "parts", workers=1), stop_after=3)
        resumed, summary = run(make_cfg(tmp_path / "parts", workers=1), resume=True)
        assert summary["steps_run"] == 3
        for key, value in params(whole.model).items():
            assert torch.equal(value, params(resumed.model)[key]), key

    def test_kill_9_then_resume_is_identical(self, tmp_path: Path) -> None:
        script = textwrap.dedent(f"""
            import os, signal, sys
            sys.path[:0] = [{str(HERE)!r}, {str(HERE.parent)!r}]  # test_trainer, hang_guard
            from test_trainer import make_cfg, run
            from pathlib import Path
            cfg = make_cfg(Path({str(tmp_path / "killed")!r}), ckpt_every=1)
            def die(step, logs):
                if step == 4:
                    os.kill(os.getpid(), signal.SIGKILL)
            import test_trainer
            from crossview.train.trainer import Trainer
            import torch
            from train_standin import StandInModel, StandInStereo
            torch.manual_seed(0)
            Trainer(cfg, model=StandInModel(), train_set=StandInStereo(),
                    val_set=StandInStereo(4), progress=False, on_step=die).run()
        """)
        result = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                                timeout=HANG_GUARD_SECONDS)
        assert result.returncode == -9, result.stderr
        assert latest_checkpoint(tmp_path / "killed").name == "step-00000003.pt"
        resumed, _ = run(make_cfg(tmp_path / "killed", ckpt_every=1), resume=True)
        straight, _ = run(make_cfg(tmp_path / "straight", ckpt_every=1))
        for key, value in params(straight.model).items():
            torch.testing.assert_close(params(resumed.model)[key], value, rtol=0, atol=0)

    def test_sigterm_to_the_process_group_saves_with_sample_making_workers(
            self, tmp_path: Path) -> None:
        # `timeout` and a terminal's Ctrl-C signal the whole process group, typically while
        # the trainer waits for the workers' samples: the workers must leave the signal to
        # the trainer, which finishes its step, saves and ends them
        script = textwrap.dedent(f"""
            import os, signal, sys
            sys.path[:0] = [{str(HERE)!r}, {str(HERE.parent)!r}]  # test_trainer, hang_guard
            import torch
            from pathlib import Path
            from test_trainer import make_cfg
            from crossview.train.trainer import Trainer, batch_indices
            from train_standin import StandInModel, StandInStereo

            class SignalsTheGroup(StandInStereo):
                def __getitem__(self, index):
                    if index == batch_indices(3, 2, len(self), 0)[0]:
                        os.killpg(0, signal.SIGTERM)
                    return super().__getitem__(index)

            cfg = make_cfg(Path({str(tmp_path / "stopped")!r}), steps=8, workers=2,
                           ckpt_every=100)
            torch.manual_seed(0)
            summary = Trainer(cfg, model=StandInModel(), train_set=SignalsTheGroup(),
                              progress=False).run()
            print("stopped", summary["step"], summary["signal"])
        """)
        result = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                                timeout=HANG_GUARD_SECONDS, start_new_session=True)
        assert result.returncode == 0, result.stderr
        step = int(result.stdout.split()[1])
        assert f"stopped {step} {int(signal.SIGTERM)}" in result.stdout and 1 <= step < 8
        assert latest_checkpoint(tmp_path / "stopped").name == f"step-{step:08d}.pt"

    def test_resume_refuses_a_different_config(self, tmp_path: Path) -> None:
        run(make_cfg(tmp_path), stop_after=2)
        with pytest.raises(UserError, match=r"train\.steps differs from the checkpoint's \(6 "
                                            r"there, 7 now\), and the run stopped at step 2 of "
                                            r"6: finish it first \(resume with train\.steps 6\), "
                                            r"then raise train\.steps to train it on"):
            run(make_cfg(tmp_path, steps=7), resume=True)
        with pytest.raises(UserError, match=r"train\.batch_size differs"):
            run(make_cfg(tmp_path, batch_size=4), resume=True)
        with pytest.raises(UserError, match="no checkpoint"):
            run(make_cfg(tmp_path / "empty"), resume=True)

    def test_raising_steps_extends_a_finished_run_exactly(self, tmp_path: Path,
                                                          log_lines: Callable[[], str]) -> None:
        """A finished run of 6 steps resumed with 12 trains 6 more with the schedule run again
        (the learning rates of steps 7-12 are those of steps 1-6); stopped and resumed inside
        the extension, it ends with the parameters of the uninterrupted extension."""
        for name in ("a", "b"):
            run(make_cfg(tmp_path / name))
        log_lines()
        straight, summary = run(make_cfg(tmp_path / "a", steps=12), resume=True)
        assert summary["steps_run"] == 6
        assert log_lines() == ("note: --resume: the run finished at step 6; training on to "
                               "step 12 with the one-cycle learning-rate schedule over the 6 "
                               "added steps\n")
        rates = {r["step"]: r["lr"] for r in map(json.loads, (
            tmp_path / "a" / "log.jsonl").read_text().splitlines()) if r["kind"] == "train"}
        assert [rates[s] for s in range(7, 13)] == [rates[s] for s in range(1, 7)]
        _, summary = run(make_cfg(tmp_path / "b", steps=12), resume=True, stop_after=8)
        assert summary["step"] == 8
        resumed, summary = run(make_cfg(tmp_path / "b", steps=12), resume=True)
        assert summary["steps_run"] == 4
        for key, value in params(straight.model).items():
            torch.testing.assert_close(params(resumed.model)[key], value, rtol=0, atol=0)
        with pytest.raises(UserError, match=r"train\.steps 4 is below the step the run reached "
                                            r"\(12, .*\); to train it on, raise train\.steps "
                                            "above 12"):
            run(make_cfg(tmp_path / "a", steps=4), resume=True)

    def test_nonfinite_steps_are_skipped_and_counted(self, tmp_path: Path) -> None:
        cfg = make_cfg(tmp_path, steps=4, batch_size=16, val_every=100)
        data = StandInStereo(32, nan_at=tuple(range(16, 32)))
        order = [batch_indices(s, 16, 32, 0) for s in range(4)]
        poisoned = [any(i >= 16 for i in idx) for idx in order]
        before = {}

        def watch(step, logs):
            before[step] = logs["skipped"]

        torch.manual_seed(0)
        trainer = Trainer(cfg, model=StandInModel(), train_set=data, progress=False,
                          on_step=watch)
        trainer.run()
        assert [bool(before[s + 1]) for s in range(4)] == poisoned
        assert trainer.nonfinite_total == sum(poisoned)
        for p in trainer.model.parameters():
            assert torch.isfinite(p).all()

    def test_too_many_nonfinite_in_a_row_stops_clearly(self, tmp_path: Path) -> None:
        cfg = make_cfg(tmp_path, steps=10, max_nonfinite=3)
        data = StandInStereo(8, nan_at=tuple(range(8)))
        with pytest.raises(UserError, match="3 steps in a row had a non-finite"):
            Trainer(cfg, model=StandInModel(), train_set=data, progress=False).run()

    def test_weights_blown_up_by_the_learning_rate_reach_the_guard(self, tmp_path: Path,
                                                                    monkeypatch) -> None:
        """Step 1 is finite but its rate makes the weights explode: the next forwards raise
        inside MatchAttention before any loss exists, and count as non-finite steps."""
        cfg = config_from_dict({"train": {"steps": 8, "batch_size": 1, "val_every": 2,
                                          "out_dir": str(tmp_path), "max_nonfinite": 3},
                                "optim": {"lr": 1e6, "grad_clip": 0}})
        torch.manual_seed(0)
        model = MatchStereo(MatchStereoConfig(dims=(8, 8, 8, 8), encoder_depths=(1, 1, 1, 1),
                                              decoder_layers=(1, 1, 1, 1), radii=(1, 1, 1, 1),
                                              heads=2, encoder_head=0))
        diverged = []
        original = Trainer._forward

        def spy(self: Trainer, batch: dict) -> dict | None:
            outputs = original(self, batch)
            diverged.append(outputs is None)
            return outputs

        monkeypatch.setattr(Trainer, "_forward", spy)
        trainer = Trainer(cfg, model=model, train_set=StandInStereo(4, size=(128, 160)),
                          val_set=StandInStereo(1, size=(128, 160)), progress=False)
        with pytest.raises(UserError, match="stopping at step 4: 3 steps in a row had a "
                                            "non-finite loss, gradient or field"):
            trainer.run()
        assert diverged == [False, True, True, True] and trainer.nonfinite_total == 3
        assert max(float(p.detach().abs().max()) for p in trainer.model.parameters()) > 1e3
        records = [json.loads(line) for line in (tmp_path / "log.jsonl").read_text().splitlines()]
        assert [r["epe"] for r in records if r["kind"] == "val"] == [pytest.approx(math.nan,
                                                                                    nan_ok=True)]

    def test_bf16_autocast_trains(self, tmp_path: Path) -> None:
        _, summary = run(make_cfg(tmp_path, steps=2, precision="bf16"))
        assert torch.isfinite(torch.tensor(summary["train"]["loss"]))

    def test_fp16_on_cpu_is_refused(self, tmp_path: Path) -> None:
        with pytest.raises(UserError, match="fp16"):
            run(make_cfg(tmp_path, precision="fp16"))


# A run (steps 8, validation at 3, 6, 8, each a new best; checkpoints at 2, 3, 4, 6, 8, the last
# two kept) killed with SIGKILL around the N-th file renamed into place while step 6 is saved
_KILLED_AT_RENAME = textwrap.dedent(f"""
    import os, signal, sys
    sys.path[:0] = [{str(HERE)!r}, {str(HERE.parent)!r}]  # test_trainer, hang_guard
    from pathlib import Path
    import torch
    from test_trainer import make_cfg
    from train_standin import StandInModel, StandInStereo
    from crossview.train.trainer import Trainer
    out, when, nth = sys.argv[1], sys.argv[2], int(sys.argv[3])
    replace, renamed = os.replace, []
    def rename_or_die(source, target):
        renamed.append(target)
        if len(renamed) == nth and when == "before":
            os.kill(os.getpid(), signal.SIGKILL)
        replace(source, target)
        if len(renamed) == nth and when == "after":
            os.kill(os.getpid(), signal.SIGKILL)
    def arm(step, logs):
        if step == 6:
            os.replace = rename_or_die
    torch.manual_seed(0)
    Trainer(make_cfg(Path(out), steps=8), model=StandInModel(), train_set=StandInStereo(),
            val_set=StandInStereo(4), progress=False, on_step=arm).run()
""")


def _timeless(records: list[dict]) -> list[dict]:
    return [{k: v for k, v in r.items() if k not in ("step_s", "samples_per_s")}
            for r in records]


def _run_files(run_dir: Path) -> tuple[list[str], dict, list[dict]]:
    """File names, best.pt and log records of a run directory."""
    log = [json.loads(line) for line in (run_dir / "log.jsonl").read_text().splitlines()]
    return sorted(p.name for p in run_dir.iterdir()), load_checkpoint(run_dir / "best.pt"), log


# where the kill falls: best.pt (rename 1) is written before step-00000006.pt (rename 2)
@pytest.mark.parametrize(("when", "nth", "best_step", "temporary"), [
    ("before", 1, 3, True), ("after", 1, 6, False), ("after", 2, 6, False)])
def test_a_kill_while_saving_a_new_best_leaves_a_run_that_resumes_to_the_same_files(
        tmp_path: Path, log_lines: Callable[[], str], when: str, nth: int,
        best_step: int, temporary: bool) -> None:
    killed = tmp_path / "killed"
    result = subprocess.run([sys.executable, "-c", _KILLED_AT_RENAME, str(killed), when,
                             str(nth)], capture_output=True, text=True,
                            timeout=HANG_GUARD_SECONDS)
    assert result.returncode == -9, result.stderr
    assert load_checkpoint(killed / "best.pt")["step"] == best_step
    left = [p for p in killed.iterdir() if p.name.startswith(".crossview-tmp-")]
    assert len(left) == temporary
    run(make_cfg(killed, steps=8), resume=True, stop_after=7)
    run(make_cfg(tmp_path / "straight", steps=8), stop_after=7)
    names, best, log = _run_files(killed)
    straight_names, straight_best, straight_log = _run_files(tmp_path / "straight")
    assert names == straight_names  # no temporary left either
    assert best["step"] == straight_best["step"] == 6
    for key, value in straight_best["model"].items():
        torch.testing.assert_close(best["model"][key], value, rtol=0, atol=0)
    assert _timeless(log) == _timeless(straight_log)  # one record per step, as never stopped
    err = log_lines()
    assert err == "".join(f"warning: removed {p}, left behind by crossview process "
                          f"{p.name.split('-')[-2]}, which ended before it finished (killed?)\n"
                          for p in left)


@pytest.mark.parametrize("damage", ["stale", "missing"])
def test_resume_mends_the_best_checkpoint_that_an_older_version_left_stale(
        tmp_path: Path, log_lines: Callable[[], str], damage: str) -> None:
    """Older versions copied best.pt after the step checkpoint that records the new best: a
    kill in between left best.pt behind (here: step 3's while step 6 was the best)."""
    run(make_cfg(tmp_path, steps=8), stop_after=4)
    older_best = (tmp_path / "best.pt").read_bytes()
    run(make_cfg(tmp_path, steps=8), resume=True, stop_after=6)
    if damage == "stale":
        (tmp_path / "best.pt").write_bytes(older_best)
    else:
        (tmp_path / "best.pt").unlink()
    Trainer(make_cfg(tmp_path, steps=8), model=StandInModel(), train_set=StandInStereo(),
            val_set=StandInStereo(4), resume=True, progress=False)
    best, newest = (load_checkpoint(tmp_path / name) for name in ("best.pt", "step-00000006.pt"))
    assert best["step"] == 6
    for key, value in newest["model"].items():
        torch.testing.assert_close(best["model"][key], value, rtol=0, atol=0)
    was = "stale (step 3, metric " if damage == "stale" else "missing; "
    assert log_lines().startswith(f"warning: --resume: {tmp_path / 'best.pt'} was "
                                              f"{was}")


def test_start_removes_the_temporaries_of_killed_writes_and_nothing_else(
        tmp_path: Path, log_lines: Callable[[], str]) -> None:
    gone = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"],
                          capture_output=True, text=True, check=True).stdout.strip()
    host = socket.gethostname()
    stale = [f".crossview-tmp-{host}-{gone}-k2j4h5g6.pt", f".step-00000004.pt.tmp-{gone}",
             f".best.pt.tmp-{gone}"]  # the last two: the names of older versions
    kept = [f".crossview-tmp-{host}-{os.getpid()}-k2j4h5g6.pt",  # a live owner
            f".crossview-tmp-otherhost-{gone}-k2j4h5g6.pt",  # cannot be checked from here
            f".notes.tmp-{gone}", "step-00000004.pt.tmp"]  # not names of ours
    tmp_path.mkdir(exist_ok=True)
    for name in stale + kept:
        (tmp_path / name).write_text("x")
    Trainer(make_cfg(tmp_path), model=StandInModel(), train_set=StandInStereo(), progress=False)
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(kept)
    assert log_lines().count("warning: removed ") == len(stale)


def test_one_run_directory_holds_one_run_at_a_time(tmp_path: Path) -> None:
    cfg = make_cfg(tmp_path / "run", steps=2)
    first = Trainer(cfg, model=StandInModel(), train_set=StandInStereo(), progress=False)
    with pytest.raises(UserError, match=rf"^{tmp_path / 'run'} is in use by another training "
                                        rf"run \(process {os.getpid()}\)"):
        Trainer(cfg, model=StandInModel(), train_set=StandInStereo(), progress=False)
    first.run()  # ends by letting the directory go
    _, summary = run(cfg, resume=True)
    assert summary["step"] == 2


def test_a_run_that_fails_to_start_lets_its_directory_go(tmp_path: Path) -> None:
    with pytest.raises(UserError, match="--resume"):
        run(make_cfg(tmp_path / "run"), resume=True)  # nothing to resume from
    assert not (tmp_path / "run").exists()
    run(make_cfg(tmp_path / "run", steps=1))


def test_log_is_parseable_when_killed_mid_run(tmp_path: Path) -> None:
    cfg = make_cfg(tmp_path)
    run(cfg, stop_after=2)
    lines = (tmp_path / "log.jsonl").read_text().splitlines()
    assert all(json.loads(line)["step"] <= 2 for line in lines)
    assert os.path.exists(tmp_path / "step-00000002.pt")


def test_init_weights_fine_tunes_from_a_file(tmp_path: Path) -> None:
    from safetensors.torch import save_file

    torch.manual_seed(123)
    source = StandInModel()
    save_file(source.state_dict(), tmp_path / "published.safetensors")
    torch.manual_seed(0)
    trainer = Trainer(make_cfg(tmp_path / "run"), model=StandInModel(),
                      train_set=StandInStereo(), init_weights=tmp_path / "published.safetensors",
                      progress=False)
    for key, value in source.state_dict().items():
        assert torch.equal(trainer.model.state_dict()[key], value)
    torch.save({"model": {"bogus": torch.zeros(1)}}, tmp_path / "wrong.pth")
    with pytest.raises(UserError, match="missing keys"):
        Trainer(make_cfg(tmp_path / "run2"), model=StandInModel(), train_set=StandInStereo(),
                init_weights=tmp_path / "wrong.pth", progress=False)


def test_checkpoints_of_versions_without_the_newer_config_keys_resume(tmp_path: Path) -> None:
    """A checkpoint written before ``recipe``, ``optim.schedule`` and ``schedule_start``
    existed resumes: missing keys compare as their defaults (one schedule from step 0)."""
    straight, _ = run(make_cfg(tmp_path / "a"))
    run(make_cfg(tmp_path / "b"), stop_after=3)
    path = latest_checkpoint(tmp_path / "b")
    state = load_checkpoint(path)
    del state["config"]["recipe"], state["config"]["optim"]["schedule"], state["schedule_start"]
    torch.save(state, path)
    resumed, summary = run(make_cfg(tmp_path / "b"), resume=True)
    assert summary["steps_run"] == 3
    for key, value in params(straight.model).items():
        torch.testing.assert_close(params(resumed.model)[key], value, rtol=0, atol=0)
    path = latest_checkpoint(tmp_path / "b")
    state = load_checkpoint(path)
    state["config"]["optim"]["momentum"] = 0.9  # a key this version does not know
    torch.save(state, path)
    with pytest.raises(UserError, match=r"--resume: the config in .* does not fit this "
                                        r"version: config: unknown key 'optim.momentum'"):
        run(make_cfg(tmp_path / "b"), resume=True)
