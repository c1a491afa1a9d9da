"""ConvGLU against its formula written out with functional ops."""

from __future__ import annotations

import torch
import torch.nn.functional as F

from crossview.nn.convglu import ConvGLU


def test_matches_formula() -> None:
    torch.manual_seed(0)
    module = ConvGLU(4).double()
    x = torch.randn(2, 5, 6, 4, dtype=torch.float64)
    hidden = F.linear(x, module.fc1.weight, module.fc1.bias)
    a, v = hidden[..., :8], hidden[..., 8:]
    a = F.conv2d(a.permute(0, 3, 1, 2), module.dwconv.weight, module.dwconv.bias, padding=1,
                 groups=8).permute(0, 2, 3, 1)
    expected = F.linear(F.gelu(a) * v, module.fc2.weight, module.fc2.bias)
    torch.testing.assert_close(module(x), expected)
    assert module.fc1.weight.shape == (16, 4) and module.fc2.weight.shape == (4, 8)


def test_gradcheck() -> None:
    module = ConvGLU(2).double()
    x = torch.randn(1, 3, 3, 2, dtype=torch.float64, requires_grad=True)
    assert torch.autograd.gradcheck(module, (x,))
