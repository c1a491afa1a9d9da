"""What is particular to the Triton kernels (crossview.attention.match.gpu_kernels), run on CPU
tensors under Triton's interpreter (TRITON_INTERPRET=1; skipped otherwise, see .ci/run) and on
a GPU when there is one: extreme scores, the forward without weights, strided inputs, the clamp,
wide heads. test_backends.py holds them to the reference in every dtype, test_function.py to
the golden vectors and gradcheck."""

from __future__ import annotations

import pytest
import torch
from match_cases import CASES, Case, inputs, run

from crossview.attention import match_attention
from crossview.attention.match.choose import unavailable_reason

DEVICES = [pytest.param("cpu", id="cpu"),
           pytest.param("cuda", id="cuda", marks=[
               pytest.mark.gpu,
               pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")])]
pytestmark = pytest.mark.triton


@pytest.fixture(params=DEVICES)
def device(request: pytest.FixtureRequest) -> str:
    if (why := unavailable_reason("triton", request.param)) is not None:
        pytest.skip(f"the triton backend cannot run on {request.param} here: {why}")
    return request.param


def _on(device: str, tensors: list[torch.Tensor]) -> list[torch.Tensor]:
    return [t.to(device) for t in tensors]


def test_corners_far_below_the_window_max_do_not_underflow(device: str) -> None:
    # Large dot products put one corner's scores 1000s below the window max: each corner's
    # online softmax keeps its own max, so none of its exponentials underflows.
    case = Case(1, 4, 4, 6, 6, 1, 4, 3, 1, False, "dot", 3.0)
    q, k, v, rel_pos = inputs(case, torch.float64, seed=5)
    q, k = q * 30, k * 30
    grad_out = torch.randn(1, 4, 4, 1, 3, dtype=torch.float64)
    fused = run("triton", _on(device, [q, k, v, rel_pos]), case, grad_out.to(device), None)
    reference = run("reference", [q, k, v, rel_pos], case, grad_out, None)
    for got, expected in zip(fused, reference, strict=True):
        assert torch.isfinite(got).all()
        torch.testing.assert_close(got.cpu(), expected, rtol=1e-9, atol=1e-9)


def test_the_forward_without_weights_gives_the_same_output(device: str) -> None:
    case = CASES[1]
    tensors = _on(device, inputs(case, torch.float32, seed=1))
    out, attn = match_attention(*tensors, case.radius, return_attn=True, backend="triton")
    assert torch.equal(match_attention(*tensors, case.radius, backend="triton"), out)
    assert attn.shape == (*out.shape[:4], (2 * case.radius + 2) ** 2)


def test_non_contiguous_inputs(device: str) -> None:
    case = CASES[0]
    q, k, v, rel_pos = inputs(case, torch.float32, seed=4)
    # Same values, a strided layout (as produced by a permute in a model; clone keeps it).
    k_strided = k.permute(0, 2, 1, 3, 4).contiguous().permute(0, 2, 1, 3, 4)
    assert not k_strided.clone().is_contiguous()
    grad_out = torch.randn(*q.shape[:4], case.cv)
    fused = run("triton", _on(device, [q, k_strided, v, rel_pos]), case, grad_out.to(device),
                None)
    reference = run("reference", [q, k, v, rel_pos], case, grad_out, None)
    for got, expected in zip(fused, reference, strict=True):
        torch.testing.assert_close(got.cpu(), expected, rtol=1e-5, atol=3e-5)


def test_rel_pos_gradient_is_zero_where_clamped(device: str) -> None:
    q = torch.randn(1, 4, 4, 2, 2, dtype=torch.float64, device=device)
    rel_pos = torch.full((1, 4, 4, 1, 2), 10.0, dtype=torch.float64, device=device,
                         requires_grad=True)
    match_attention(q, q, q, rel_pos, 1, backend="triton").sum().backward()
    assert torch.equal(rel_pos.grad, torch.zeros_like(rel_pos))


def test_the_backward_gives_the_same_bits_every_run(device: str) -> None:
    # No atomic adds: each key's gradient is summed by one program in a fixed order.
    case = CASES[2]
    tensors = _on(device, inputs(case, torch.float32, seed=2))
    grad_out = torch.randn(*tensors[0].shape[:4], case.cv).to(device)
    first, second = (run("triton", tensors, case, grad_out, None) for _ in range(2))
    for a, b in zip(first, second, strict=True):
        assert torch.equal(a, b)


@pytest.mark.parametrize("name", ["q", "v"])
def test_heads_wider_than_the_kernels_hold_raise(device: str, name: str) -> None:
    tensors = {"q": torch.zeros(1, 4, 4, 1, 8), "k": torch.zeros(1, 4, 4, 1, 8),
               "v": torch.zeros(1, 4, 4, 1, 8), "rel_pos": torch.zeros(1, 4, 4, 1, 2)}
    tensors[name] = torch.zeros(1, 4, 4, 1, 257)
    if name == "q":
        tensors["k"] = torch.zeros(1, 4, 4, 1, 257)
    with pytest.raises(ValueError, match=rf"at most 256 channels per head, got {name}\.shape"):
        match_attention(**{key: t.to(device) for key, t in tensors.items()}, radius=1,
                        backend="triton")


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
def test_the_gpu_forward_allocates_about_its_output() -> None:
    q, k, v = (torch.randn(1, 64, 64, 4, 64, device="cuda") for _ in range(3))
    rel_pos = torch.randn(1, 64, 64, 1, 2, device="cuda") * 4
    torch.cuda.synchronize()
    torch.cuda.reset_peak_memory_stats()
    before = torch.cuda.memory_allocated()
    with torch.no_grad():
        out = match_attention(q, k, v, rel_pos, 1, backend="triton")
    torch.cuda.synchronize()
    out_bytes = out.numel() * out.element_size()
    # The output plus a few bytes of launch parameters: no window is materialised.
    assert torch.cuda.max_memory_allocated() - before <= out_bytes + 2**20
