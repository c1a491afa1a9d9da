"""Every MatchAttention backend available here held to the reference backend in float64: the
forward (output and mixed weights) and each gradient, in every dtype the backend supports, with
tolerances per dtype and per output (as NATTEN holds its backends to its reference).

The inputs are drawn in float64 and rounded to the dtype under test; the float64 reference sees
the same rounded values (and the same rounded upstream gradients), so the tolerances measure
only the backend's arithmetic, not the rounding of its inputs."""

from __future__ import annotations

import functools

import pytest
import torch
from match_cases import CASES, OUTPUTS, Case, inputs, run

from crossview.attention.match.choose import BACKENDS, unavailable_reason

# dtype -> output -> (atol, rtol), for ``|got - float64 reference| <= atol + rtol * |reference|``.
# float64: summation order moves results by ~1e-15 (measured up to 7e-15); 1e-12 leaves room.
# float32: measured up to 6.5e-7 (out), 2.3e-7 (attn), 2.2e-6 (grad_q), 1.3e-6 (grad_k),
#   1.7e-6 (grad_v), 9.1e-6 (grad_rel_pos, whose values reach 90). Rounding errors grow like
#   sqrt(n) for a typical summation order and like n for the worst one, n up to ~130 terms here
#   (64 channels, 64 window keys), so atol sits 10-20x above the measured errors: any summation
#   order passes, a wrong term does not.
# bfloat16 is computed in float32 and rounded once: the rounding alone is up to 2^-8 relative
#   (measured 3.9e-3), so rtol is 2^-7, and atol covers the float32 errors near zero.
# float16 likewise with its own rounding, up to 2^-11 relative: rtol 2^-10.
FLOAT32 = {"out": (1e-5, 1e-5), "attn": (1e-5, 1e-5), "grad_q": (3e-5, 1e-5),
           "grad_k": (3e-5, 1e-5), "grad_v": (3e-5, 1e-5), "grad_rel_pos": (2e-4, 1e-5)}
TOLERANCES: dict[torch.dtype, dict[str, tuple[float, float]]] = {
    torch.float64: dict.fromkeys(OUTPUTS, (1e-12, 1e-12)),
    torch.float32: FLOAT32,
    torch.bfloat16: {name: (atol, 2**-7) for name, (atol, _) in FLOAT32.items()},
    torch.float16: {name: (atol, 2**-10) for name, (atol, _) in FLOAT32.items()},
}
# Every backend in every dtype on CPU tensors (the triton backend under Triton's interpreter,
# marked so CI can run just those with TRITON_INTERPRET=1), except the reference in float64:
# that is the yardstick itself. The triton backend again on a GPU when there is one.
ON_A_GPU = [pytest.mark.gpu, pytest.mark.skipif(not torch.cuda.is_available(),
                                                reason="needs a CUDA GPU")]
CONFIGURATIONS = [
    *(pytest.param(backend.name, dtype, "cpu", id=f"{backend.name}-{dtype}",
                   marks=[pytest.mark.triton] if backend.name == "triton" else [])
      for backend in BACKENDS for dtype in TOLERANCES
      if (backend.name, dtype) != ("reference", torch.float64)),
    *(pytest.param("triton", dtype, "cuda", id=f"triton-{dtype}-cuda", marks=ON_A_GPU)
      for dtype in TOLERANCES),
]


def _upstream(case: Case, dtype: torch.dtype) -> tuple[torch.Tensor, torch.Tensor | None]:
    """Upstream gradients of out and (for the cases sharing rel_pos across heads) of attn."""
    gen = torch.Generator().manual_seed(3)
    queries = (case.batch, case.hq, case.wq, case.heads)
    grad_out = torch.randn(*queries, case.cv, generator=gen, dtype=torch.float64).to(dtype)
    if not case.shared:
        return grad_out, None
    window = (2 * case.radius + 2) ** 2
    return grad_out, torch.randn(*queries, window, generator=gen, dtype=torch.float64).to(dtype)


@functools.cache
def _reference(index: int, dtype: torch.dtype) -> list[torch.Tensor]:
    """The float64 reference on case ``index``'s inputs rounded to ``dtype``."""
    case = CASES[index]
    grad_out, grad_attn = _upstream(case, dtype)
    return run("reference", [t.double() for t in inputs(case, dtype, seed=index)], case,
               grad_out.double(), None if grad_attn is None else grad_attn.double())


@pytest.mark.parametrize("index", range(len(CASES)), ids=lambda index: str(CASES[index]))
@pytest.mark.parametrize(("backend", "dtype", "device"), CONFIGURATIONS)
def test_backend_matches_the_float64_reference(backend: str, dtype: torch.dtype, device: str,
                                               index: int) -> None:
    if (why := unavailable_reason(backend, device, dtype)) is not None:
        pytest.skip(f"backend {backend!r} cannot run here: {why}")
    case = CASES[index]
    got = run(backend, [t.to(device) for t in inputs(case, dtype, seed=index)], case,
              *(None if t is None else t.to(device) for t in _upstream(case, dtype)))
    for name, tensor, expected in zip(OUTPUTS, got, _reference(index, dtype), strict=True):
        tensor = tensor.cpu()
        assert tensor.dtype == dtype and tensor.shape == expected.shape, name
        atol, rtol = TOLERANCES[dtype][name]
        torch.testing.assert_close(tensor.double(), expected, atol=atol, rtol=rtol,
                                   msg=lambda default, name=name: f"{name}: {default}")
