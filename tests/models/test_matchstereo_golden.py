"""MatchStereo-T against the golden vectors of the published implementation (random weights).

Exactness is proven in float64: the published code, run in float64, produced
``matchstereo_tiny_vectors_f64.safetensors``, and every field (initial, each layer's self and
cross field, the upsampled ones, the full-resolution field and the self relative positions) must
agree with it to 1e-9 px, with nothing resolved by hand. Float64 noise (~1e-12 px) is far from
the two discontinuities of the network (``floor(centre)`` in cross-attention and the
non-occlusion threshold), so this holds on any CPU and any vector kernel.

The float32 vectors cannot be an exactness reference: float32 noise (~1e-5 px) crosses those two
discontinuities at a few pixels, and where it does a field moves by up to ~0.9 px downstream.
The published code itself, re-run in float32 on another CPU, misses its own float32 vectors at
0.14-0.75 % of pixels. The float32 test therefore states what is true on every CPU: almost all
values within ``1e-3 + 1e-4 |ref|`` px and a tiny median error.
"""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
from safetensors.torch import load_file

from crossview.models.matchstereo.model import MatchStereo

GOLDEN = Path(__file__).resolve().parents[3] / "shared" / "golden"
WEIGHTS = GOLDEN / "matchstereo_tiny_random_weights.safetensors"
VECTORS_F32 = GOLDEN / "matchstereo_tiny_vectors.safetensors"
VECTORS_F64 = GOLDEN / "matchstereo_tiny_vectors_f64.safetensors"
CALLS = ["stereo", "flow", "init"]
F64_TOLERANCE = 1e-9
# Measured on this project's machines: the worst key keeps 98.5-99.8 % of its values within the
# tolerance (flow's full-resolution field is the worst), the median error is 3e-5 px or less.
F32_MIN_FRACTION_WITHIN = 0.97
F32_MAX_MEDIAN_ERROR = 1e-4

pytestmark = pytest.mark.skipif(not (VECTORS_F32.exists() and VECTORS_F64.exists()),
                                reason="golden vectors not available")


def golden_names(kinds: list[str]) -> list[str]:
    """Golden key suffixes (``NN.self`` / ``NN.cross``) for our ``field_kinds`` list."""
    names, index = [], 0
    for kind in kinds:
        names.append(f"{index:02d}.{'cross' if kind == 'cross' else 'self'}")
        index += kind != "self"
    return names


def fields_against_golden(dtype: torch.dtype, golden: dict[str, torch.Tensor],
                          call: str) -> dict[str, tuple[torch.Tensor, torch.Tensor]]:
    """``{key: (ours, reference)}`` for every field the golden file holds for ``call``."""
    model = MatchStereo().eval()
    model.load_state_dict(load_file(WEIGHTS), strict=True)
    model = model.to(dtype)
    task = "flow" if call == "flow" else "stereo"
    init = golden["init.init_flow_in"].to(dtype) if call == "init" else None
    with torch.no_grad():
        out = model.forward_fields(golden["stereo.left"].to(dtype),
                                   golden["stereo.right"].to(dtype), task=task, init_field=init)
    assert len(out["fields"]) == 55
    ours = {"init_flow": out["init_field"], "field_up": out["field"], "self_rpos": out["self_rpos"]}
    ours |= {f"field_all.{n}": f for n, f in zip(golden_names(out["field_kinds"]), out["fields"],
                                                 strict=True)}
    if call != "init":
        ours["init_cv"] = out["init_cv"]
    pairs = {}
    for key, actual in ours.items():
        ref = golden[f"{call}.{key}"]
        assert actual.shape == ref.shape, key
        assert actual.dtype == dtype, key
        pairs[key] = (actual, ref)
    return pairs


@pytest.mark.parametrize("call", CALLS)
def test_golden_fields_float64_exact(call: str) -> None:
    golden = load_file(VECTORS_F64)
    assert golden["stereo.left"].dtype == torch.float64
    failures = []
    for key, (actual, ref) in fields_against_golden(torch.float64, golden, call).items():
        error = (actual - ref).abs().max().item()
        if not error <= F64_TOLERANCE:
            failures.append(f"{key}: max error {error:.2e} px")
    assert not failures, "\n".join(failures)


@pytest.mark.parametrize("call", CALLS)
def test_golden_fields_float32_statistically(call: str) -> None:
    golden = load_file(VECTORS_F32)
    pairs = fields_against_golden(torch.float32, golden, call)
    failures, errors = [], []
    for key, (actual, ref) in pairs.items():
        error = (actual.double() - ref.double()).abs()
        assert error.isfinite().all(), key
        fraction = (error <= 1e-3 + 1e-4 * ref.double().abs()).double().mean().item()
        if fraction < F32_MIN_FRACTION_WITHIN:
            failures.append(f"{key}: {fraction:.2%} within 1e-3 + 1e-4|ref|")
        errors.append(error.flatten())
    median = torch.cat(errors).median().item()
    assert median <= F32_MAX_MEDIAN_ERROR, f"median error {median:.2e} px"
    assert not failures, "\n".join(failures)
