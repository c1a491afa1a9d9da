"""The numpy consistency (crossview.geometry.consistency_arrays) against the torch one
(crossview.geometry.consistency): bit-identical errors and masks on CPUs whose torch kernels
use fused multiply-adds, the same rule everywhere; and bad input."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from crossview.geometry import consistency, consistency_arrays

# torch's vectorised CPU grid_sample sums with FMA on these capabilities; elsewhere (the
# scalar DEFAULT build) its sums round differently, by an ulp or so
FMA_CAPABILITIES = {"AVX2", "AVX512", "SVE256", "NEON"}


def _fields(n: int, h: int, w: int, y_spread: float, seed: int) -> np.ndarray:
    """Both views' stereo-like fields ``[n, h, w, 2]`` float32: disparities up to 20 px, y
    spread ``y_spread`` px."""
    rng = np.random.default_rng(seed)
    field = np.zeros((n, h, w, 2), np.float32)
    field[: n // 2, ..., 0] = -rng.uniform(0, 20, (n // 2, h, w))
    field[n // 2:, ..., 0] = rng.uniform(0, 20, (n // 2, h, w))
    field[..., 1] = rng.normal(0, y_spread, (n, h, w))
    return field


@pytest.mark.parametrize(("n", "h", "w", "y_spread"), [
    (2, 50, 97, 0.0), (2, 50, 97, 0.7), (4, 37, 64, 0.7), (2, 1, 30, 0.5), (2, 20, 1, 0.5),
    (2, 1, 1, 0.0)])
def test_the_error_is_torchs(n: int, h: int, w: int, y_spread: float) -> None:
    field = _fields(n, h, w, y_spread, seed=h * w)
    want, want_inside = consistency.consistency_error(torch.from_numpy(field))
    got, inside = consistency_arrays.consistency_error(field)
    assert got.dtype == np.float32 and got.shape == (n, h, w)
    assert np.array_equal(inside, want_inside.numpy())
    if torch.backends.cpu.get_cpu_capability() in FMA_CAPABILITIES:
        assert np.array_equal(got, want.numpy())
    np.testing.assert_allclose(got, want.numpy(), atol=1e-4)


def test_the_mask_is_torchs_at_the_fusions_threshold() -> None:
    field = _fields(2, 64, 80, 0.0, seed=1)
    field[1] = -np.roll(field[0], -3, axis=1)  # many pixels consistent, some just so
    want = consistency.noc_mask(torch.from_numpy(field), 0.5).numpy()
    got = consistency_arrays.noc_mask(field, 0.5)
    assert 0 < got.mean() < 1
    if torch.backends.cpu.get_cpu_capability() in FMA_CAPABILITIES:
        assert np.array_equal(got, want)


@pytest.mark.parametrize(("field", "error"), [
    (np.zeros((3, 4, 4, 2), np.float32), ValueError),
    (np.zeros((2, 4, 4), np.float32), ValueError),
    (np.zeros((2, 4, 4, 2), np.float64), TypeError)])
def test_bad_fields_are_refused(field: np.ndarray, error: type[Exception]) -> None:
    with pytest.raises(error, match="field"):
        consistency_arrays.consistency_error(field)
