"""``crossview bench kernels`` and the compile check of the Triton kernels
(crossview.attention.match.gpu_compile): compiled for an H100 (sm_90) on the CPU, no GPU
needed, in a child process without TRITON_INTERPRET. Marked ``triton`` so that CI's Triton
step runs them; skipped where Triton is not installed."""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from crossview.bench import kernels
from crossview.cli.app import main

needs_triton = pytest.mark.skipif(importlib.util.find_spec("triton") is None,
                                  reason="needs Triton: pip install 'crossview[gpu]'")
pytestmark = [pytest.mark.triton, needs_triton]


def _variants(*specs: tuple) -> list:
    from crossview.attention.match.gpu_compile import Variant

    return [Variant(*spec) for spec in specs]


# The compile check compiles a representative subset, not all 69 variants of the published
# models (about 2 minutes; `crossview bench kernels` compiles them all): per kernel the widest
# heads (128 channels, MatchStereo-B and MatchFlow-B), the narrowest (8, MatchStereo-T) and a
# width Triton cannot take as 16-aligned (40, MatchStereo-T/S), float32 and the half dtypes.
REPRESENTATIVE = [
    ("forward", "float32", 128, 128, 2), ("forward", "float16", 8, 8, 1),
    ("forward", "bfloat16", 40, 40, 2),
    ("backward_rows", "float32", 40, 40, 2), ("backward_rows", "bfloat16", 8, 8, 1),
    ("backward_rows", "float16", 128, 128, 2),
    ("backward_keys", "float32", 128, 128, None), ("backward_keys", "bfloat16", 40, 40, None),
]


def test_the_published_models_variants() -> None:
    assert kernels.scales(kernels.PUBLISHED["matchstereo-t"]) == [(2, 40), (2, 32), (1, 16),
                                                                  (1, 8)]
    assert kernels.scales(kernels.PUBLISHED["matchstereo-b"]) == [(2, 128), (2, 80), (1, 64),
                                                                  (1, 32)]
    used = kernels.model_variants(list(kernels.PUBLISHED), ["float32"])
    # 8 (radius, channels) pairs: forward and backward rows each; 7 widths: backward keys
    assert len(used) == 23
    names = {v.name: models for v, models in used.items()}
    assert names["forward r2 c40 fp32"] == ["T", "S"]
    assert names["backward keys c32 fp32"] == ["T", "S", "B", "F"]
    assert names["backward rows r2 c128 fp32"] == ["B", "F"]
    tiny = kernels.model_variants(["matchstereo-t"], ["float32"], backward=False)
    assert [v.name for v in tiny] == ["forward r2 c40 fp32", "forward r2 c32 fp32",
                                      "forward r1 c16 fp32", "forward r1 c8 fp32"]


def test_first_use_counts_each_distinct_kernel_once() -> None:
    used = kernels.model_variants(["matchstereo-t"], ["float32"])
    rows = [{"variant": v.name, "target": "sm_90", "compile_s": 2.0, "cpu_s": 1.0,
             "hash": v.name} for v in used]
    # forward r2 c32 is the same compiled kernel as forward r2 c40 here: a cache hit
    rows[3].update(hash=rows[0]["hash"], compile_s=0.01, cpu_s=0.01)
    assert rows[3]["variant"] == "forward r2 c32 fp32"
    first = kernels.first_use(rows, used)["sm_90"]
    assert first == {"first_pair_s": 6.0, "first_pair_cpu_s": 3.0, "first_pair_kernels": 3,
                     "first_step_s": 22.0, "first_step_cpu_s": 11.0, "first_step_kernels": 11}


def test_the_kernels_compile_in_seconds_without_spills(tmp_path: Path,
                                                        monkeypatch: pytest.MonkeyPatch,
                                                        capsys: pytest.CaptureFixture) -> None:
    subset = _variants(*REPRESENTATIVE)
    monkeypatch.setattr(kernels, "model_variants",
                        lambda models, dtypes: {variant: ["test"] for variant in subset})
    json_path = tmp_path / "kernels.json"
    with pytest.raises(SystemExit) as done:
        main(["bench", "kernels", "--target", "sm_90", "--json", str(json_path)])
    assert done.value.code in (0, None)
    rows = json.loads(json_path.read_text())["rows"]
    assert [row["variant"] for row in rows] == [v.name for v in subset]
    for row in rows:
        # CPU seconds, what the 2-core CI machine's wall clock shows when nothing else runs
        # (on a busy machine the wall clock is mostly waiting)
        assert row["cpu_s"] < kernels.MAX_COMPILE_S, row
        assert row["spills"] == 0 and row["stack_bytes"] == 0, row
        assert 0 < row["registers"] <= 255 and 0 < row["ptx_lines"] < 10_000, row
        assert row["cached"] and row["target"] == "sm_90", row
        assert row["status"] == "ok", row
    assert "Triton kernels of MatchAttention compiled on the CPU" in capsys.readouterr().out


_SPECIALISATION = """
import json, logging, sys, types
import torch, triton
from triton.backends.compiler import GPUTarget
from triton.runtime.jit import MockTensor
from crossview.attention.match import gpu_compile, gpu_kernels, gpu_launch_cache

def forward(height, width, shared, need_attn):
    q, k, v = (MockTensor(torch.float32, [2, height, width, 4, 40]) for _ in range(3))
    rel_pos = MockTensor(torch.float32, [2, height, width, 1 if shared else 4, 2])
    _, args, kwargs = gpu_kernels.forward_launch(
        q, k, v, rel_pos, MockTensor(torch.float32, [3]), q, q if need_attn else None, 2, True)
    return gpu_launch_cache.specialization(gpu_kernels._forward_kernel, args, kwargs)

keys = {forward(h, w, shared, attn) for h, w in [(6, 6), (16, 32), (1, 97), (96, 320)]
        for shared in (True, False) for attn in (True, False)}
print(len(keys))
# a GPU without one: the launch's target is all that is asked of the driver
triton.runtime.driver.set_active(types.SimpleNamespace(
    get_current_target=lambda: GPUTarget("cuda", 90, 32)))
logging.basicConfig(level=logging.INFO, format="%(name)s: %(message)s", stream=sys.stdout)
variant = gpu_compile.Variant("forward", "float32", 8, 8, 1)
kernel, args, kwargs = gpu_compile.launch(variant)
for _ in range(2):
    with gpu_kernels._note_compile(kernel, args, kwargs):
        pass
gpu_compile.compile_variant(variant, "sm_90")  # into Triton's (empty) cache
gpu_launch_cache._seen.clear()
gpu_kernels._told = False
with gpu_kernels._note_compile(kernel, args, kwargs):  # cached on disk: nothing to say
    pass
print("done")
"""


def test_one_kernel_per_variant_and_one_note_before_compiling(tmp_path: Path) -> None:
    env = {key: value for key, value in os.environ.items() if key != "TRITON_INTERPRET"}
    env["TRITON_CACHE_DIR"] = str(tmp_path)
    done = subprocess.run([sys.executable, "-c", _SPECIALISATION], env=env, check=True,
                          capture_output=True, text=True)
    # image size, rel_pos shared or per head, weights written or not: one compiled kernel
    assert done.stdout.splitlines() == [
        "1", "crossview.attention.match.gpu_kernels: compiling the GPU kernels, once", "done"]


def test_bad_options_are_user_errors(capsys: pytest.CaptureFixture) -> None:
    with pytest.raises(SystemExit) as done:
        main(["bench", "kernels", "--dtype", "float64", "--target", "hopper"])
    assert done.value.code == 2
    assert "got float64, hopper" in capsys.readouterr().err
