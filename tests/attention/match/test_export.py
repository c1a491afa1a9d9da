"""The export backend (crossview.attention.match.export) traces to few operators: the export
time of a model grows with its traced graph (docs/export.md), and a MatchAttention call runs
twice per decoder layer and pass."""

from __future__ import annotations

import math

import torch

from crossview.attention.match.export import match_attention_gathers, sub_window_mask


class _Call(torch.nn.Module):
    def forward(self, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor,
                rel_pos: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        return match_attention_gathers(q, k, v, rel_pos, 2, "l1", 0.5)


def test_one_call_traces_to_at_most_70_operators() -> None:
    """65 (the mask computed with tensors took 121): one constant for the sub-window mask, no
    dtype conversions that do nothing."""
    q = torch.rand(1, 12, 20, 2, 8)
    program = torch.export.export(_Call(), (q, q, q, torch.rand(1, 12, 20, 1, 2)))
    operators = [n for n in program.graph.nodes if n.op == "call_function"]
    assert len(operators) <= 70, len(operators)


def test_the_sub_window_mask_marks_each_sub_window() -> None:
    """Row i is 0 on the (2r+1)^2 cells of sub-window i (nw, ne, sw, se) of the (2r+2)^2
    expanded window, -inf on the others."""
    for radius in (1, 2, 3):
        side = 2 * radius + 2
        mask = sub_window_mask(radius, torch.device("cpu"), torch.float32)
        assert mask.shape == (4, side * side) and mask.dtype == torch.float32
        cells = mask.view(4, side, side)
        for i, (dy, dx) in enumerate(((0, 0), (0, 1), (1, 0), (1, 1))):
            inside = torch.zeros(side, side, dtype=torch.bool)
            inside[dy:dy + side - 1, dx:dx + side - 1] = True
            assert (cells[i][inside] == 0).all()
            assert (cells[i][~inside] == -math.inf).all()
