"""MatchAttention test cases shared by test_backends.py and test_cpu.py: seeded random inputs
(hand-picked shapes plus random ones, centres inside and far outside the key map) and a run
that returns the forward outputs and every gradient."""

from __future__ import annotations

import random
from dataclasses import dataclass

import torch

from crossview.attention import match_attention

OUTPUTS = ("out", "attn", "grad_q", "grad_k", "grad_v", "grad_rel_pos")


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


def inputs(case: Case, dtype: torch.dtype, seed: int) -> list[torch.Tensor]:
    """q, k, v and rel_pos of ``case``, drawn in float64 and rounded to ``dtype``."""
    gen = torch.Generator().manual_seed(seed)

    def randn(*shape: int) -> torch.Tensor:
        return torch.randn(*shape, generator=gen, dtype=torch.float64)

    q = randn(case.batch, case.hq, case.wq, case.heads, case.channels)
    k = randn(case.batch, case.hk, case.wk, case.heads, case.channels)
    v = randn(case.batch, case.hk, case.wk, case.heads, case.cv)
    rel_pos = randn(case.batch, case.hq, case.wq, 1 if case.shared else case.heads, 2) * case.spread
    return [t.to(dtype) for t in (q, k, v, rel_pos)]


def run(backend: str, inputs: list[torch.Tensor], case: Case, grad_out: torch.Tensor,
        grad_attn: torch.Tensor | None) -> list[torch.Tensor]:
    """``[out, attn, grad_q, grad_k, grad_v, grad_rel_pos]`` (see :data:`OUTPUTS`) of
    ``backend`` for upstream gradients ``grad_out`` and ``grad_attn`` (none for the weights if
    ``None``), all in the inputs' dtype."""
    leaves = [t.clone().requires_grad_() for t in inputs]
    out, attn = match_attention(*leaves, case.radius, similarity=case.similarity,
                                return_attn=True, backend=backend)
    outputs, grads = [out], [grad_out.to(out.dtype)]
    if grad_attn is not None:
        outputs.append(attn)
        grads.append(grad_attn.to(attn.dtype))
    return [out.detach(), attn.detach(), *torch.autograd.grad(outputs, leaves, grads)]
