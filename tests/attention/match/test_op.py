"""crossview::match_attention as a torch.library custom op: schema, fake kernel, autograd
registration (opcheck), torch.export seeing it as one op, and an eager call that does not
import torch._dynamo."""

from __future__ import annotations

import subprocess
import sys

import pytest
import torch

from crossview.attention import match_attention
from crossview.attention.match.op import match_attention_backward_op, match_attention_op
from crossview.cpu_kernels import cpu_build
from hang_guard import HANG_GUARD_SECONDS

pytestmark = pytest.mark.skipif(cpu_build.unavailable_reason() is not None,
                                reason=f"{cpu_build.unavailable_reason()}")


def _inputs(shared: bool = True) -> tuple[torch.Tensor, ...]:
    gen = torch.Generator().manual_seed(0)
    q = torch.randn(1, 5, 6, 2, 4, generator=gen)
    k = torch.randn(1, 6, 7, 2, 4, generator=gen)
    v = torch.randn(1, 6, 7, 2, 3, generator=gen)
    rel_pos = torch.randn(1, 5, 6, 1 if shared else 2, 2, generator=gen) * 2
    return q, k, v, rel_pos


@pytest.mark.parametrize("need_attn", [True, False])
def test_opcheck(need_attn: bool) -> None:
    q, k, v, rel_pos = (t.requires_grad_() for t in _inputs(shared=False))
    torch.library.opcheck(match_attention_op, (q, k, v, rel_pos, 1, True, 0.5, need_attn))
    grad_out = torch.randn(1, 5, 6, 2, 3)
    torch.library.opcheck(match_attention_backward_op,
                          (grad_out, None, q.detach(), k.detach(), v.detach(),
                           rel_pos.detach(), 1, False, 0.5))


class _Block(torch.nn.Module):
    def forward(self, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor,
                rel_pos: torch.Tensor) -> torch.Tensor:
        return match_attention(q, k, v, rel_pos, 1, backend="cpu") * 2


def test_torch_export_sees_one_op() -> None:
    inputs = _inputs()
    exported = torch.export.export(_Block(), inputs)
    targets = [node.target for node in exported.graph.nodes if node.op == "call_function"]
    assert targets.count(torch.ops.crossview.match_attention.default) == 1
    assert not [t for t in targets if "index" in str(t) or "gather" in str(t)]
    torch.testing.assert_close(exported.module()(*inputs), _Block()(*inputs))


def test_fake_tensors_give_shapes_without_running_kernels() -> None:
    from torch._subclasses.fake_tensor import FakeTensorMode

    with FakeTensorMode() as mode:
        q, k, v, rel_pos = (mode.from_tensor(t) for t in _inputs())
        out, attn = match_attention(q, k, v, rel_pos, 2, return_attn=True, backend="cpu")
    assert out.shape == (1, 5, 6, 2, 3)
    assert attn.shape == (1, 5, 6, 2, 36)


def test_an_eager_call_does_not_import_dynamo() -> None:
    """Forward and backward in a fresh process leave ``torch._dynamo`` unimported: its import
    takes seconds, a large share of a one-pair ``crossview stereo`` call (``custom_op``'s
    kernel wrapper imported it on the first call)."""
    code = """
import sys, torch
from crossview.attention.match.op import match_attention_op
q = torch.randn(1, 5, 6, 2, 4, requires_grad=True)
out, _ = match_attention_op(q, q, q, torch.zeros(1, 5, 6, 1, 2), 1, True, 0.5, False)
out.sum().backward()
print("torch._dynamo" in sys.modules)
"""
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=HANG_GUARD_SECONDS)
    assert done.returncode == 0, done.stderr
    assert done.stdout == "False\n"
