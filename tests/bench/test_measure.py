from __future__ import annotations

import os
import sys

import torch

from crossview.bench.measure import peak_cpu_bytes


def test_peak_cpu_bytes_sees_the_allocations_and_keeps_stderr_clean(capfd) -> None:
    def work() -> torch.Tensor:
        a = torch.ones(1000)          # 4000 bytes, live to the end
        b = torch.ones(2000)          # 8000 bytes, freed before c is made
        del b
        c = torch.ones(500)           # 2000 bytes
        os.write(2, b"a line from C\n")
        print("a line from Python", file=sys.stderr)
        return a + c[:1]              # 4000 more bytes

    peak = peak_cpu_bytes(work)
    assert 12000 <= peak < 12000 + 512  # a and b together (plus small scalar temporaries)
    err = capfd.readouterr().err
    assert "USDT" not in err  # the profiler library's start/stop notices are dropped
    assert "a line from C\n" in err and "a line from Python\n" in err
