"""``crossview bench model``: the case list, ratios paired within one run, a real child case."""

from __future__ import annotations

from pathlib import Path

import cv2
import numpy as np
import pytest
import torch
from PIL import Image

from crossview.bench import model as bench
from crossview.models.matchstereo import VARIANTS
from crossview.models.matchstereo.specs import matchstereo_spec
from crossview.models.registry import FusedNetwork, get_spec, register_model


def test_cases_cover_models_sizes_precisions_and_reference() -> None:
    cases = bench.default_cases(["T", "S"], [(384, 1248), (1536, 1536)], ["fp32", "bf16"],
                                big=True, reference_sizes=[(384, 1248)], repeats=3, threads=2,
                                reference_models=["T", "S"])
    keys = {(c["model"], tuple(c["size"]), c["precision"], c["backend"]) for c in cases}
    assert ("T", (2176, 3840), "bf16", "cpu") in keys
    assert ("S", (2176, 3840), "fp32", "cpu") not in keys
    assert ("S", (384, 1248), "bf16", "reference") in keys
    assert ("S", (1536, 1536), "fp32", "reference") not in keys
    assert len(cases) == 2 * 2 * 2 + 2 * 2 + 2  # fused, reference at one size, 4K for T
    assert {(c["repeats"], c["warmup"]) for c in cases if c["size"][0] > 1000} == {(1, 0)}
    default = bench.default_cases(["T", "S"], [(384, 1248)], ["fp32"], big=False,
                                  reference_sizes=[(384, 1248)], repeats=3, threads=2)
    assert [(c["model"], c["backend"]) for c in default] == [
        ("T", "cpu"), ("T", "reference"), ("S", "cpu")]
    assert {c["refine"] for c in default} == {None}  # published models: never refined


def test_a_refining_model_also_runs_without_its_refinement() -> None:
    register_model(matchstereo_spec("bench-refining-stereo", VARIANTS["tiny"], "stereo",
                                    refine=True), replace=True)
    cases = bench.default_cases(["bench-refining-stereo"], [(384, 1248)], ["fp32"], big=False,
                                reference_sizes=[], repeats=1, threads=2)
    assert [(c["backend"], c["refine"]) for c in cases] == [("cpu", None), ("cpu", False)]


def test_a_fusing_model_runs_its_fused_networks_refinement() -> None:
    spec = get_spec("matchstereo-hybrid")
    assert spec.refine and spec.fuse and not spec.fused_network.refine
    assert not bench.refines_by_default(spec)
    cases = bench.default_cases(["matchstereo-hybrid"], [(384, 1248)], ["fp32"], big=False,
                                reference_sizes=[], repeats=1, threads=2)
    assert [(c["backend"], c["refine"]) for c in cases] == [("cpu", None)]


def test_a_fusing_model_runs_each_preset_and_the_classical_matchers_run_first() -> None:
    cases = bench.default_cases(["matchstereo-hybrid", "T"], [(384, 1248)], ["fp32"], big=False,
                                reference_sizes=[], repeats=1, threads=2,
                                presets=["fast", "best"], classical=True)
    assert [(c["model"], c.get("preset"), c.get("classical")) for c in cases] == [
        ("SGBM filled", None, "SGBM filled"), ("DIS", None, "DIS"),
        ("matchstereo-hybrid", None, None), ("matchstereo-hybrid", "fast", None),
        ("matchstereo-hybrid", "best", None), ("T", None, None)]  # T does not fuse


def test_with_alone_a_fusing_model_also_runs_unfused_and_self_fused() -> None:
    cases = bench.default_cases(["matchstereo-hybrid", "T"], [(384, 1248)], ["fp32"], big=False,
                                reference_sizes=[], repeats=1, threads=2, alone=True)
    assert [(c["model"], c.get("answer")) for c in cases] == [
        ("matchstereo-hybrid", None), ("matchstereo-hybrid", "no-fuse"),
        ("matchstereo-hybrid", "self-fuse"), ("T", None)]  # T does not fuse
    # each answer's rows pair only with themselves (ratios, vs fp32)
    assert len({bench._key(c) for c in cases}) == len(cases)


def test_a_fusing_flow_model_runs_alone_but_never_self_fused() -> None:
    assert get_spec("matchflow-hybrid").task == "flow"
    cases = bench.default_cases(["matchflow-hybrid"], [(375, 1242)], ["fp32"], big=False,
                                reference_sizes=[], repeats=1, threads=2, alone=True,
                                presets=["fast"])
    # its fused network refines: also timed without the refinement
    assert [(c["refine"], c.get("preset"), c.get("answer")) for c in cases] == [
        (None, None, None), (False, None, None), (None, "fast", None), (None, None, "no-fuse")]


@pytest.mark.parametrize("answer", ["no-fuse", "self-fuse"])
def test_measure_runs_a_fusing_model_without_its_fusion(answer: str) -> None:
    from crossview.attention import set_backend

    register_model(matchstereo_spec("bench-alone-stereo", VARIANTS["tiny"], "stereo", fuse=True,
                                    lri=True, refine=True, fused_network=FusedNetwork(0.75)),
                   replace=True)
    threads = torch.get_num_threads()
    try:
        row = bench.measure({"model": "bench-alone-stereo", "size": [192, 224],
                             "precision": "fp32", "backend": "cpu", "threads": 1, "repeats": 1,
                             "warmup": 0, "answer": answer})
    finally:
        torch.set_num_threads(threads)
        set_backend(None)
    assert row["status"] == "ok" and row["median_s"] > 0 and row["answer"] == answer
    # the network alone's own settings, at the pair's size
    assert not row["fuse"] and row["refine"] and row["network_size"] == [192, 224]


def test_ratios_to_the_classical_matchers_pair_rows_of_one_size(
        monkeypatch: pytest.MonkeyPatch) -> None:
    latency = {"SGBM filled": 0.1, "DIS": 0.05, "matchstereo-hybrid": 0.4}
    monkeypatch.setattr(bench, "run_case", lambda case, timeout: {
        **case, "status": "ok", "median_s": latency[case["model"]]})
    cases = bench.default_cases(["matchstereo-hybrid"], [(384, 1248)], ["fp32"], big=False,
                                reference_sizes=[], repeats=1, threads=1, classical=True)
    rows = {r["model"]: r for r in bench.bench_model(cases)}
    assert rows["matchstereo-hybrid"]["vs_sgbm"] == pytest.approx(4.0)
    assert rows["matchstereo-hybrid"]["vs_dis"] == pytest.approx(8.0)
    assert rows["SGBM filled"]["vs_sgbm"] == 1.0
    assert "ratio" not in rows["DIS"]  # no fused-vs-reference ratio for OpenCV


def test_a_real_pair_reaches_every_case_resized(tmp_path: Path) -> None:
    rng = np.random.default_rng(0)
    views = [rng.integers(0, 256, (30, 50, 3), dtype=np.uint8) for _ in range(2)]
    pair = [tmp_path / "left.png", tmp_path / "right.png"]
    for view, path in zip(views, pair, strict=True):
        Image.fromarray(view).save(path)
    cases = bench.default_cases(["matchstereo-hybrid"], [(20, 40)], ["fp32"], big=False,
                                reference_sizes=[], repeats=1, threads=1, classical=True,
                                pair=pair)
    assert len(cases) == 3 and all(c["pair"] == [str(p) for p in pair] for c in cases)
    left, right = bench.bench_pair(20, 40, cases[0]["pair"])
    assert left.shape == right.shape == (1, 3, 20, 40)
    expected = cv2.resize(views[1], (40, 20), interpolation=cv2.INTER_AREA)
    np.testing.assert_array_equal(right[0].permute(1, 2, 0).numpy(), expected)


@pytest.mark.parametrize("name", sorted(bench.CLASSICAL))
def test_measure_times_a_classical_matcher(name: str) -> None:
    import cv2

    threads, opencv_threads = torch.get_num_threads(), cv2.getNumThreads()
    try:  # measure() is meant for a child process: it sets threads process-wide
        row = bench.measure({"model": name, "size": [64, 96], "precision": "-",
                             "backend": "opencv", "device": "cpu", "threads": 1, "repeats": 1,
                             "warmup": 0, "classical": name})
    finally:
        torch.set_num_threads(threads)
        cv2.setNumThreads(opencv_threads)
    assert row["status"] == "ok" and row["median_s"] > 0 and row["cpu_s"] >= 0


def test_ratios_pair_rows_of_the_same_configuration(monkeypatch: pytest.MonkeyPatch) -> None:
    latency = {("cpu", "fp32"): 2.0, ("reference", "fp32"): 12.0, ("cpu", "bf16"): 1.0}

    def fake(case, timeout):
        return {**case, "status": "ok", "median_s": latency[(case["backend"], case["precision"])]}

    monkeypatch.setattr(bench, "run_case", fake)
    cases = bench.default_cases(["T"], [(384, 1248)], ["fp32", "bf16"], big=False,
                                reference_sizes=[(384, 1248)], repeats=1, threads=1)
    cases = [c for c in cases if (c["backend"], c["precision"]) in latency]
    rows = {(r["backend"], r["precision"]): r for r in bench.bench_model(cases)}
    assert rows[("cpu", "fp32")]["ratio"] == 6.0 and rows[("cpu", "fp32")]["vs_fp32"] == 1.0
    assert rows[("cpu", "bf16")]["ratio"] is None and rows[("cpu", "bf16")]["vs_fp32"] == 2.0
    assert "ratio" not in rows[("reference", "fp32")]


@pytest.mark.parametrize(("model", "task"), [("T", "stereo"), ("matchstereo-mini", "stereo"),
                                           ("matchflow-mini", "flow")])
def test_measure_runs_one_small_case(model: str, task: str) -> None:
    from crossview.attention import set_backend

    threads = torch.get_num_threads()
    try:  # measure() is meant for a child process: it sets threads and backend process-wide
        row = bench.measure({"model": model, "size": [192, 192], "precision": "fp32",
                             "backend": "cpu", "threads": 1, "repeats": 1, "warmup": 0})
    finally:
        torch.set_num_threads(threads)
        set_backend(None)
    assert row["status"] == "ok" and row["median_s"] > 0 and row["peak_rss_mib"] > 0
    assert row["model"] == model and row["task"] == task


def test_a_fused_pair_above_the_cap_reports_the_network_at_its_working_size() -> None:
    from crossview.attention import set_backend

    register_model(matchstereo_spec("bench-capped-stereo", VARIANTS["tiny"], "stereo", fuse=True,
                                    fused_network=FusedNetwork(0.75, max_pixels=256 * 320)),
                   replace=True)
    threads = torch.get_num_threads()
    try:
        row = bench.measure({"model": "bench-capped-stereo", "size": [512, 640],
                             "precision": "fp32", "backend": "cpu", "threads": 1, "repeats": 1,
                             "warmup": 0})
    finally:
        torch.set_num_threads(threads)
        set_backend(None)
    assert row["status"] == "ok" and row["fuse"]
    assert row["network_size"] == [192, 240]  # 0.75 of the 256x320 working size


def test_on_a_gpu_every_model_runs_4k_on_the_triton_backend() -> None:
    cases = bench.default_cases(["T", "S"], [(384, 1248)], ["fp16"], big=True,
                                reference_sizes=[(384, 1248)], repeats=3, threads=2,
                                device="cuda")
    assert [(c["model"], tuple(c["size"]), c["backend"]) for c in cases] == [
        ("T", (384, 1248), "triton"), ("T", (384, 1248), "reference"),
        ("S", (384, 1248), "triton"), ("T", (2176, 3840), "triton"),
        ("S", (2176, 3840), "triton")]
    assert {c["device"] for c in cases} == {"cuda"}
    assert bench.DEFAULT_PRECISIONS["cuda"] == ("fp16", "bf16")


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
def test_measure_runs_one_small_case_on_a_gpu() -> None:
    row = bench.measure({"model": "T", "size": [192, 192], "precision": "fp16",
                         "backend": "triton", "device": "cuda", "threads": 1, "repeats": 1,
                         "warmup": 0})
    assert row["status"] == "ok" and row["median_s"] > 0 and row["peak_gpu_mib"] > 0
