"""Data-parallel evaluation: strided shares, merged results equal to one process, no hangs.

Ranks are separate processes launched with torchrun's environment variables (as the 2-process
training test does) or by torchrun itself for the CLI; everything runs on CPU with gloo.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from crossview.distributed import DistInfo, dist_info_from_env, shard_strided
from crossview.errors import UserError
from crossview.eval import evaluate
from crossview.metrics import get_metrics
from eval_dist_worker import METRICS, noisy_predictor, toy_stereo
from hang_guard import HANG_GUARD_SECONDS
from ranks import finish_ranks, start_ranks

WORKER = Path(__file__).with_name("eval_dist_worker.py")
DATASET = "synthetic-stereo,length=5,size=128x160"  # 5 samples: not divisible by 2 ranks


def _cli(*args: str) -> list[str]:
    return [sys.executable, "-m", "crossview", "eval", *args]


@pytest.mark.parametrize("world", [1, 2, 3, 4])
def test_strided_shares_are_disjoint_and_cover_every_sample(world: int) -> None:
    for count in range(10):
        shares = [list(shard_strided(count, DistInfo(rank, world, rank))) for rank in range(world)]
        assert sorted(i for share in shares for i in share) == list(range(count))
        assert max(map(len, shares)) - min(map(len, shares)) <= 1
    assert list(shard_strided(7, DistInfo(1, 3, 1))) == [1, 4]


def test_dist_info_from_env(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("WORLD_SIZE", raising=False)
    assert dist_info_from_env() == DistInfo()
    monkeypatch.setenv("WORLD_SIZE", "2")
    monkeypatch.delenv("RANK", raising=False)
    with pytest.raises(UserError, match="RANK is not set"):
        dist_info_from_env()
    monkeypatch.setenv("RANK", "1")
    monkeypatch.setenv("LOCAL_RANK", "1")
    assert dist_info_from_env() == DistInfo(rank=1, world_size=2, local_rank=1)


def test_two_ranks_score_strided_shares_and_get_the_one_process_result(tmp_path: Path) -> None:
    runs = finish_ranks(start_ranks([sys.executable, str(WORKER), str(tmp_path)], [0, 1], 2))
    assert [code for code, *_ in runs] == [0, 0], [err for *_, err in runs]
    ranks = [json.loads((tmp_path / f"rank{r}.json").read_text()) for r in (0, 1)]
    assert ranks[0]["seen"] == [0, 2, 4, 6] and ranks[1]["seen"] == [1, 3, 5]
    reference = evaluate(toy_stereo(7), noisy_predictor(), get_metrics("stereo", METRICS),
                         dataset_name="toy")
    expected = json.loads(json.dumps(reference.to_dict()))  # NaN -> null, as the ranks wrote
    assert expected["per_sample"][2]["epe"] is None  # the sample without valid pixels
    assert expected["summary"]["epe"]["pooled"] != expected["summary"]["epe"]["image_mean"]
    # category "b" (samples 1 and 4) has one sample on each rank
    b = [row["epe"] for row in expected["per_sample"] if row["name"] in ("s1", "s4")]
    assert expected["categories"]["b"]["epe"]["image_mean"] == pytest.approx(sum(b) / 2)
    assert ranks[0]["result"] == expected and ranks[1]["result"] == expected


def test_a_failing_share_stops_every_rank(tmp_path: Path) -> None:
    (code0, _, err0), (code1, _, err1) = finish_ranks(start_ranks(
        [sys.executable, str(WORKER), str(tmp_path), "3"], [0, 1], 2))
    assert code1 == 1 and "ValueError: broken sample 3" in err1  # its own error, re-raised
    assert code0 == 2
    assert err0 == "error: evaluation failed on rank 1: ValueError: broken sample 3\n"
    assert not list(tmp_path.iterdir())


def test_torchrun_eval_equals_one_process(tmp_path: Path) -> None:
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    args = ["--model", "matchstereo-mini", "--dataset", DATASET, "--json"]
    one = subprocess.run(_cli(*args, str(tmp_path / "one.json")), capture_output=True,
                         text=True, env=env, timeout=HANG_GUARD_SECONDS)
    assert one.returncode == 0, one.stderr
    two = subprocess.run([sys.executable, "-m", "torch.distributed.run", "--standalone",
                          "--nproc-per-node", "2", "-m", "crossview", "eval", *args,
                          str(tmp_path / "out" / "two.json")],
                         capture_output=True, text=True, env=env, timeout=HANG_GUARD_SECONDS)
    assert two.returncode == 0, two.stderr
    # rank 0 alone printed: the same tables, once
    assert two.stdout.replace("out/two.json", "one.json") == one.stdout
    assert one.stdout.count("mean per pixel (benchmark)") == 1
    assert [p.name for p in (tmp_path / "out").iterdir()] == ["two.json"]  # no temporary left
    results = [json.loads((tmp_path / name).read_text()) for name in ("one.json", "out/two.json")]
    for result in results:
        del result["machine"]
    assert results[0]["samples"] == 5 and [row["name"] for row in results[0]["per_sample"]] == [
        "0", "1", "2", "3", "4"]
    assert results[1] == results[0]  # means, summaries and per-sample rows, exactly


def test_bad_input_fails_on_every_rank_before_any_collective() -> None:
    # ranks 0 and 1 of three: rank 2 never comes, so a rank that opened the process group
    # before checking its input would wait for it (and time out here) instead of exiting
    runs = finish_ranks(start_ranks(_cli("--model", "matchstereo-mini", "--dataset", DATASET,
                                         "--metrics", "x"), [0, 1], 3))
    for code, out, err in runs:
        assert code == 2 and out == ""
        assert err.startswith("error: unknown stereo metric") and err.count("\n") == 1


def test_the_api_evaluates_a_benchmark_and_reports_on_the_main_rank(tmp_path: Path) -> None:
    """``api.evaluate_benchmark`` is what ``crossview eval`` calls: the same result as the
    command's JSON, ``report`` called once with it, progress stepped per sample."""
    from crossview import api

    reports, steps = [], []

    def track(label: str, total: int):
        steps.append((label, total))
        return lambda name: steps.append(name)

    run = api.evaluate_benchmark("matchstereo-mini", DATASET, limit=3, progress=track,
                                 report=reports.append)
    assert reports == [run] and run.dist.is_main and run.baselines is None
    assert steps == [("eval synthetic-stereo", 3), "0", "1", "2"]
    done = subprocess.run([*_cli("--model", "matchstereo-mini", "--dataset", DATASET,
                                 "--limit", "3", "--json", str(tmp_path / "cli.json"))],
                          capture_output=True, text=True, timeout=HANG_GUARD_SECONDS)
    assert done.returncode == 0, done.stderr
    assert json.loads((tmp_path / "cli.json").read_text())["mean"] == run.result.mean()
    with pytest.raises(UserError, match="needs a torchrun launch"):
        api.evaluate_benchmark("matchstereo-mini", DATASET, distributed=True)
