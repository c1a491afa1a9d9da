"""The published grid normalisation and the exact ties it decides."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

from crossview.pixel_grid import to_grid_coords


def _read_pixel(row: torch.Tensor, grid_x: torch.Tensor) -> torch.Tensor:
    """``grid_sample`` (``align_corners=True``) of a ``[n]`` float64 row at grid coordinates."""
    grid = torch.stack([grid_x, torch.zeros_like(grid_x)], -1).view(1, 1, -1, 2)
    return F.grid_sample(row.view(1, 1, 1, -1), grid, align_corners=True).flatten()


def test_the_tie_the_other_order_misses() -> None:
    row = torch.tensor([0.0, 0.0, 0.0, 0.0, 2.0**40, 0.0], dtype=torch.float64)
    p = torch.tensor([3.0], dtype=torch.float64)
    assert _read_pixel(row, to_grid_coords(p, 6)).item() == 0.0
    assert _read_pixel(row, p * (2 / 5) - 1).item() != 0.0  # multiply-by-reciprocal blends


@pytest.mark.parametrize("n", [2, 6, 7, 12, 13, 64, 385])
def test_matches_the_published_formula_bit_for_bit(n: int) -> None:
    # Neither order of operations reads every integer pixel exactly (n = 7 misses one either way);
    # what matters is rounding as the published code rounds.
    g = torch.Generator().manual_seed(n)
    x = torch.cat([torch.arange(n, dtype=torch.float64),
                   torch.rand(50, generator=g, dtype=torch.float64) * (n - 1)])
    assert torch.equal(to_grid_coords(x, n), 2 * x / (n - 1) - 1)
    assert torch.equal(to_grid_coords(x.float(), n), 2 * x.float() / (n - 1) - 1)


def test_one_pixel_axis_and_bad_size() -> None:
    assert to_grid_coords(0.0, 1) == -1.0
    with pytest.raises(ValueError, match="n=0"):
        to_grid_coords(0.0, 0)
