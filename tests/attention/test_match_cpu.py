"""The fused cpu backend (crossview.attention.match_cpu + csrc kernels) held to the reference
backend: forward, mixed weights and every gradient, over seeded random shapes."""

from __future__ import annotations

import random
from dataclasses import dataclass

import pytest
import torch

from crossview.attention import match_attention, match_cpu

pytestmark = pytest.mark.skipif(match_cpu.unavailable_reason() is not None,
                                reason=f"{match_cpu.unavailable_reason()}")

TOLERANCE = {torch.float64: 1e-10, torch.float32: 1e-5, torch.bfloat16: 2e-2}


@dataclass(frozen=True)
class Case:
    batch: int
    hq: int
    wq: int
    hk: int
    wk: int
    heads: int
    channels: int
    cv: int
    radius: int
    shared: bool
    similarity: str
    spread: float  # rel_pos scale in tokens: large values push centres beyond the borders


def _random_cases(count: int, seed: int) -> list[Case]:
    rng = random.Random(seed)
    cases = []
    for _ in range(count):
        radius = rng.randint(0, 3)
        cases.append(Case(batch=rng.randint(1, 2), hq=rng.randint(1, 9), wq=rng.randint(1, 9),
                          hk=rng.randint(2 * radius + 2, 2 * radius + 7),
                          wk=rng.randint(2 * radius + 2, 2 * radius + 7),
                          heads=rng.randint(1, 8), channels=rng.choice([1, 3, 8, 17, 33, 64]),
                          cv=rng.choice([1, 5, 16, 64]), radius=radius, shared=rng.random() < 0.5,
                          similarity=rng.choice(["l1", "dot"]),
                          spread=rng.choice([1.0, 4.0, 12.0])))
    return cases


CASES = [
    Case(1, 7, 9, 7, 9, 4, 16, 16, 1, True, "l1", 2.0),  # self-attention shape
    Case(2, 5, 3, 8, 11, 3, 7, 9, 2, False, "l1", 20.0),  # Hq != Hk, centres far outside
    Case(1, 6, 6, 8, 8, 8, 64, 64, 3, False, "dot", 1.0),
    Case(1, 5, 8, 6, 7, 1, 64, 32, 1, False, "l1", 6.0),  # one head
    *_random_cases(10, seed=7),
]
# float32 and bfloat16 on every case, float64 on the hand-picked ones.
CASES_AND_DTYPES = [(case, dtype) for dtype in (torch.float32, torch.bfloat16) for case in CASES]
CASES_AND_DTYPES += [(case, torch.float64) for case in CASES[:4]]


def _inputs(case: Case, dtype: torch.dtype, seed: int) -> list[torch.Tensor]:
    gen = torch.Generator().manual_seed(seed)

    def randn(*shape: int) -> torch.Tensor:
        return torch.randn(*shape, generator=gen, dtype=torch.float64)

    q = randn(case.batch, case.hq, case.wq, case.heads, case.channels)
    k = randn(case.batch, case.hk, case.wk, case.heads, case.channels)
    v = randn(case.batch, case.hk, case.wk, case.heads, case.cv)
    rel_pos = randn(case.batch, case.hq, case.wq, 1 if case.shared else case.heads, 2) * case.spread
    return [t.to(dtype) for t in (q, k, v, rel_pos)]


def _run(backend: str, inputs: list[torch.Tensor], case: Case, grad_out: torch.Tensor,
         grad_attn: torch.Tensor | None) -> list[torch.Tensor]:
    leaves = [t.clone().requires_grad_() for t in inputs]
    out, attn = match_attention(*leaves, case.radius, similarity=case.similarity,
                                return_attn=True, backend=backend)
    loss = (out.float() * grad_out).sum()
    if grad_attn is not None:
        loss = loss + (attn.float() * grad_attn).sum()
    loss.backward()
    return [out, attn, *(t.grad for t in leaves)]


@pytest.mark.parametrize(("case", "dtype"), CASES_AND_DTYPES, ids=str)
def test_fused_equals_reference_forward_and_gradients(case: Case, dtype: torch.dtype) -> None:
    inputs = _inputs(case, dtype, seed=CASES.index(case))
    gen = torch.Generator().manual_seed(3)
    grad_out = torch.randn(*inputs[0].shape[:4], case.cv, generator=gen)
    window = (2 * case.radius + 2) ** 2
    grad_attn = torch.randn(*inputs[0].shape[:4], window, generator=gen) if case.shared else None
    fused = _run("cpu", inputs, case, grad_out, grad_attn)
    reference = _run("reference", inputs, case, grad_out, grad_attn)
    names = ("out", "attn", "grad_q", "grad_k", "grad_v", "grad_rel_pos")
    tol = TOLERANCE[dtype]
    for name, got, expected in zip(names, fused, reference, strict=True):
        assert got.dtype == dtype and got.shape == expected.shape, name
        torch.testing.assert_close(got.double(), expected.double(), rtol=tol, atol=tol, msg=name)


def test_corners_far_below_the_window_max_use_their_own_shift() -> None:
    # Large dot products make one corner's scores 1000s below the window max: a shared shift
    # would underflow every exponential of that corner.
    case = Case(1, 4, 4, 6, 6, 1, 4, 3, 1, False, "dot", 3.0)
    q, k, v, rel_pos = _inputs(case, torch.float64, seed=5)
    q, k = q * 30, k * 30
    grad_out = torch.randn(1, 4, 4, 1, 3, dtype=torch.float64)
    fused = _run("cpu", [q, k, v, rel_pos], case, grad_out, None)
    reference = _run("reference", [q, k, v, rel_pos], case, grad_out, None)
    for got, expected in zip(fused, reference, strict=True):
        assert torch.isfinite(got).all()
        torch.testing.assert_close(got, expected, rtol=1e-9, atol=1e-9)


def test_results_do_not_depend_on_the_thread_count() -> None:
    case = Case(2, 13, 11, 13, 11, 3, 24, 24, 2, True, "l1", 3.0)
    inputs = _inputs(case, torch.float32, seed=11)
    grad_out = torch.randn(2, 13, 11, 3, 24)
    threads = torch.get_num_threads()
    try:
        results = []
        for count in (1, 2, 3):
            torch.set_num_threads(count)
            results.append(_run("cpu", inputs, case, grad_out, None))
    finally:
        torch.set_num_threads(threads)
    for other in results[1:]:
        for got, expected in zip(other, results[0], strict=True):
            assert torch.equal(got, expected)


def test_fused_forward_matches_without_attn_output() -> None:
    case = CASES[0]
    q, k, v, rel_pos = _inputs(case, torch.float32, seed=1)
    out = match_attention(q, k, v, rel_pos, 1, backend="cpu")
    out_ref = match_attention(q, k, v, rel_pos, 1, backend="reference")
    torch.testing.assert_close(out, out_ref, rtol=1e-5, atol=1e-5)


def test_non_contiguous_inputs() -> None:
    case = CASES[0]
    q, k, v, rel_pos = _inputs(case, torch.float32, seed=4)
    # Same values, a strided layout (as produced by a permute in a model; clone keeps it).
    k_strided = k.permute(0, 2, 1, 3, 4).contiguous().permute(0, 2, 1, 3, 4)
    assert not k_strided.clone().is_contiguous()
    grad_out = torch.randn(*q.shape[:4], case.cv)
    fused = _run("cpu", [q, k_strided, v, rel_pos], case, grad_out, None)
    reference = _run("reference", [q, k, v, rel_pos], case, grad_out, None)
    for got, expected in zip(fused, reference, strict=True):
        torch.testing.assert_close(got, expected, rtol=1e-5, atol=1e-5)
