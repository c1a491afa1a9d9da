"""What is particular to the fused cpu backend (crossview.attention.match.cpu + csrc kernels):
extreme scores, thread counts, the forward without weights, strided inputs. test_backends.py
holds it to the reference on every dtype."""

from __future__ import annotations

import pytest
import torch
from match_cases import CASES, Case, inputs, run

from crossview.attention import match_attention
from crossview.cpu_kernels import cpu_build

pytestmark = pytest.mark.skipif(cpu_build.unavailable_reason() is not None,
                                reason=f"{cpu_build.unavailable_reason()}")


def test_corners_far_below_the_window_max_use_their_own_shift() -> None:
    # Large dot products make one corner's scores 1000s below the window max: a shared shift
    # would underflow every exponential of that corner.
    case = Case(1, 4, 4, 6, 6, 1, 4, 3, 1, False, "dot", 3.0)
    q, k, v, rel_pos = inputs(case, torch.float64, seed=5)
    q, k = q * 30, k * 30
    grad_out = torch.randn(1, 4, 4, 1, 3, dtype=torch.float64)
    fused = run("cpu", [q, k, v, rel_pos], case, grad_out, None)
    reference = run("reference", [q, k, v, rel_pos], case, grad_out, None)
    for got, expected in zip(fused, reference, strict=True):
        assert torch.isfinite(got).all()
        torch.testing.assert_close(got, expected, rtol=1e-9, atol=1e-9)


def test_results_do_not_depend_on_the_thread_count() -> None:
    case = Case(2, 13, 11, 13, 11, 3, 24, 24, 2, True, "l1", 3.0)
    tensors = inputs(case, torch.float32, seed=11)
    grad_out = torch.randn(2, 13, 11, 3, 24)
    threads = torch.get_num_threads()
    try:
        results = []
        for count in (1, 2, 3):
            torch.set_num_threads(count)
            results.append(run("cpu", tensors, case, grad_out, None))
    finally:
        torch.set_num_threads(threads)
    for other in results[1:]:
        for got, expected in zip(other, results[0], strict=True):
            assert torch.equal(got, expected)


def test_fused_forward_matches_without_attn_output() -> None:
    case = CASES[0]
    q, k, v, rel_pos = inputs(case, torch.float32, seed=1)
    out = match_attention(q, k, v, rel_pos, 1, backend="cpu")
    out_ref = match_attention(q, k, v, rel_pos, 1, backend="reference")
    torch.testing.assert_close(out, out_ref, rtol=1e-5, atol=1e-5)


def test_non_contiguous_inputs() -> None:
    case = CASES[0]
    q, k, v, rel_pos = inputs(case, torch.float32, seed=4)
    # Same values, a strided layout (as produced by a permute in a model; clone keeps it).
    k_strided = k.permute(0, 2, 1, 3, 4).contiguous().permute(0, 2, 1, 3, 4)
    assert not k_strided.clone().is_contiguous()
    grad_out = torch.randn(*q.shape[:4], case.cv)
    fused = run("cpu", [q, k_strided, v, rel_pos], case, grad_out, None)
    reference = run("reference", [q, k, v, rel_pos], case, grad_out, None)
    for got, expected in zip(fused, reference, strict=True):
        torch.testing.assert_close(got, expected, rtol=1e-5, atol=1e-5)
