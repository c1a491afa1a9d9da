"""Tests of crossview.attention.match.function (the public match_attention): semantics (golden
vectors, naive formulas), gradients and input validation. Every other backend is held to the
reference in test_backends.py."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
from safetensors.torch import load_file

from crossview.attention import match_attention
from crossview.attention.match.choose import unavailable_reason

# The triton backend runs CPU tensors under Triton's interpreter only (TRITON_INTERPRET=1).
TRITON = pytest.param("triton", marks=[pytest.mark.triton, pytest.mark.skipif(
    unavailable_reason("triton") is not None, reason=f"{unavailable_reason('triton')}")])
GOLDEN = Path(__file__).resolve().parents[4] / "shared" / "golden" / \
    "match_attention_op_vectors.safetensors"


def _golden_case(data: dict[str, torch.Tensor], case: int) -> dict[str, torch.Tensor | int]:
    """One golden case in crossview's layout: heads-last maps and relative positions."""
    prefix = f"case{case}."
    batch, height, width, heads, channels, radius = data[prefix + "shape"].tolist()
    maps = {name: data[prefix + name].reshape(batch, height, width, heads, -1)
            for name in ("q", "k", "v", "center", "attn", "grad_q", "grad_k", "grad_v",
                         "grad_center")}
    ys, xs = torch.meshgrid(torch.arange(height, dtype=torch.float64),
                            torch.arange(width, dtype=torch.float64), indexing="ij")
    maps["rel_pos"] = maps.pop("center") - torch.stack([xs, ys], dim=-1)[None, :, :, None]
    maps["out"] = data[prefix + "out"].reshape(batch, height, width, heads, channels)
    maps["grad_out"] = data[prefix + "grad_out"].reshape(batch, height, width, heads, channels)
    return {**maps, "radius": radius}


@pytest.mark.skipif(not GOLDEN.exists(), reason=f"golden vectors not found at {GOLDEN}")
@pytest.mark.parametrize("case", [0, 1, 2])
@pytest.mark.parametrize("backend", ["reference", "cpu", TRITON])
def test_golden_vectors_reproduced_in_float64(case: int, backend: str) -> None:
    gold = _golden_case(load_file(GOLDEN), case)
    inputs = [gold[name].clone().requires_grad_() for name in ("q", "k", "v", "rel_pos")]
    out, attn = match_attention(*inputs, gold["radius"], return_attn=True, backend=backend)
    torch.testing.assert_close(out, gold["out"], rtol=0, atol=1e-9)
    torch.testing.assert_close(attn, gold["attn"], rtol=0, atol=1e-9)
    (out * gold["grad_out"]).sum().backward()
    for name, tensor in zip(("grad_q", "grad_k", "grad_v", "grad_center"), inputs, strict=True):
        torch.testing.assert_close(tensor.grad, gold[name], rtol=0, atol=1e-9, msg=name)


def _naive_window_softmax(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor,
                          centre: torch.Tensor, radius: int, scale: float) -> torch.Tensor:
    """Plain softmax attention over the (2r+1)^2 keys around integer centres, query by query."""
    out = torch.empty(*q.shape[:4], v.shape[-1], dtype=q.dtype)
    batch, hq, wq, heads, _ = q.shape
    for b in range(batch):
        for y in range(hq):
            for x in range(wq):
                for h in range(heads):
                    cx, cy = (int(c) for c in centre[b, y, x, h])
                    keys = k[b, cy - radius:cy + radius + 1, cx - radius:cx + radius + 1, h]
                    values = v[b, cy - radius:cy + radius + 1, cx - radius:cx + radius + 1, h]
                    scores = -(q[b, y, x, h] - keys).abs().sum(-1).flatten() * scale
                    out[b, y, x, h] = scores.softmax(0) @ values.reshape(-1, v.shape[-1])
    return out


@pytest.mark.parametrize("backend", ["reference", "cpu", TRITON])
def test_integer_rel_pos_is_a_plain_window_softmax(backend: str) -> None:
    gen = torch.Generator().manual_seed(0)
    q = torch.randn(1, 5, 6, 2, 3, dtype=torch.float64, generator=gen)
    k = torch.randn(1, 7, 8, 2, 3, dtype=torch.float64, generator=gen)
    v = torch.randn(1, 7, 8, 2, 4, dtype=torch.float64, generator=gen)
    radius = 2
    centre_x = torch.randint(radius, 8 - radius - 1, (1, 5, 6, 2), generator=gen)
    centre_y = torch.randint(radius, 7 - radius - 1, (1, 5, 6, 2), generator=gen)
    centre = torch.stack([centre_x, centre_y], dim=-1).double()
    ys, xs = torch.meshgrid(torch.arange(5.0), torch.arange(6.0), indexing="ij")
    rel_pos = centre - torch.stack([xs, ys], dim=-1)[None, :, :, None].double()
    out = match_attention(q, k, v, rel_pos, radius, backend=backend)
    expected = _naive_window_softmax(q, k, v, centre, radius, 3 ** -0.5)
    torch.testing.assert_close(out, expected, rtol=0, atol=1e-12)


@pytest.mark.parametrize("backend", ["reference", TRITON])
@pytest.mark.parametrize("similarity", ["l1", "dot"])
@pytest.mark.parametrize("shared", [True, False])
def test_gradcheck_float64(backend: str, similarity: str, shared: bool) -> None:
    gen = torch.Generator().manual_seed(1)
    q = torch.randn(1, 3, 4, 2, 3, dtype=torch.float64, generator=gen)
    k = torch.randn(1, 5, 4, 2, 3, dtype=torch.float64, generator=gen)
    v = torch.randn(1, 5, 4, 2, 2, dtype=torch.float64, generator=gen)
    # Fractional centres away from integers so floor is locally constant; some clamped.
    rel_pos = torch.rand(1, 3, 4, 1 if shared else 2, 2, dtype=torch.float64, generator=gen)
    rel_pos = (rel_pos * 4 - 2).round() + 0.25 + 0.5 * rel_pos
    inputs = [t.requires_grad_() for t in (q, k, v, rel_pos)]

    def fn(*args: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        return match_attention(*args, 1, similarity=similarity, return_attn=True,
                               backend=backend)

    # fast_mode checks random projections of the Jacobian: the full one needs a backward pass
    # per output element, minutes on a busy 2-core machine.
    assert torch.autograd.gradcheck(fn, inputs, fast_mode=True)


def test_rel_pos_gradient_is_zero_where_clamped() -> None:
    q = torch.randn(1, 4, 4, 1, 2, dtype=torch.float64)
    rel_pos = torch.full((1, 4, 4, 1, 2), 10.0, dtype=torch.float64, requires_grad=True)
    match_attention(q, q, q, rel_pos, 1, backend="reference").sum().backward()
    assert torch.equal(rel_pos.grad, torch.zeros_like(rel_pos))


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
def test_half_precision_is_computed_in_float32(dtype: torch.dtype) -> None:
    gen = torch.Generator().manual_seed(2)
    q, k, v = (torch.randn(1, 6, 6, 2, 8, generator=gen).to(dtype) for _ in range(3))
    rel_pos = (torch.randn(1, 6, 6, 2, 2, generator=gen) * 2).to(dtype)
    out = match_attention(q, k, v, rel_pos, 1, backend="reference")
    assert out.dtype == dtype
    expected = match_attention(q.float(), k.float(), v.float(), rel_pos.float(), 1,
                               backend="reference")
    torch.testing.assert_close(out.float(), expected, rtol=0, atol=2e-2)


def _inputs(**changes: torch.Tensor) -> dict[str, torch.Tensor]:
    base = {"q": torch.zeros(1, 4, 5, 2, 3), "k": torch.zeros(1, 6, 7, 2, 3),
            "v": torch.zeros(1, 6, 7, 2, 4), "rel_pos": torch.zeros(1, 4, 5, 2, 2)}
    return {**base, **changes}


@pytest.mark.parametrize(("changes", "radius", "message"), [
    ({"q": torch.zeros(4, 5, 2, 3)}, 1, "q must have 5 dimensions"),
    ({"k": torch.zeros(1, 6, 7, 3, 3)}, 1, "k must be"),
    ({"k": torch.zeros(1, 6, 7, 2, 5)}, 1, "k must be"),
    ({"v": torch.zeros(1, 6, 6, 2, 4)}, 1, "v must be"),
    ({"rel_pos": torch.zeros(1, 4, 5, 3, 2)}, 1, "rel_pos must be"),
    ({"rel_pos": torch.zeros(1, 4, 5, 2, 3)}, 1, "rel_pos must be"),
    ({"v": torch.zeros(1, 6, 7, 2, 4, dtype=torch.float64)}, 1, "v must have q's dtype"),
    ({"q": torch.zeros(1, 4, 5, 2, 3, dtype=torch.int64)}, 1, "q must be float32"),
    ({"k": torch.zeros(1, 6, 7, 2, 3, device="meta")}, 1, "k must be on q's device"),
    ({"rel_pos": torch.full((1, 4, 5, 2, 2), float("nan"))}, 1, "rel_pos must be finite"),
    ({"rel_pos": torch.full((1, 4, 5, 2, 2), float("inf"))}, 1, "rel_pos must be finite"),
    ({}, 3, "radius 3 needs a key map of at least 8"),
    ({}, -1, "radius must be a non-negative int"),
])
def test_bad_inputs_raise_value_error(changes: dict[str, torch.Tensor], radius: int,
                                      message: str) -> None:
    with pytest.raises(ValueError, match=message):
        match_attention(**_inputs(**changes), radius=radius, backend="reference")


def test_bad_similarity_and_non_tensor_inputs() -> None:
    with pytest.raises(ValueError, match="similarity must be one of"):
        match_attention(**_inputs(), radius=1, similarity="cosine")
    with pytest.raises(TypeError, match=r"q must be a torch\.Tensor"):
        match_attention(**{**_inputs(), "q": [[0.0]]}, radius=1)
