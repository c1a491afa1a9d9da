"""MatchAttention: the public operator, its backends and the chooser between them.

The files, each importing only files listed above it:

- ``checks.py``: input checks shared by the operator and the backends;
- ``backend.py``: what a backend provides (:class:`Backend`): its "can I run here?" checks,
  which return the reason it cannot, and its forward;
- ``reference.py``: the reference backend, plain PyTorch on any device (the readable semantics);
- ``export.py``: the export backend, plain PyTorch in operators every ONNX runtime has;
- ``op.py``: the fused C++ kernels (built by :mod:`crossview.cpu_kernels`) as the torch custom
  ops ``crossview::match_attention`` and ``crossview::match_attention_backward``, with fake
  kernels and autograd;
- ``cpu.py``: the fused cpu backend (the custom ops on CPU tensors);
- ``gpu_kernels.py``: the fused Triton kernels (imported only if Triton is installed);
- ``gpu_compile.py``: what those kernels compile to for a GPU, checked on the CPU (compile
  time, registers, spills), and whether a launch will compile;
- ``gpu.py``: the ``triton`` backend (those kernels as the custom ops' CUDA kernels; CPU
  tensors under Triton's interpreter, for tests);
- ``choose.py``: the backends in order of preference, the process-wide default, the choice
  and the reasons behind it;
- ``function.py``: :func:`match_attention` (check, choose, run).
"""

from crossview.attention.match.checks import NonFiniteError as NonFiniteError
from crossview.attention.match.choose import BackendChoice as BackendChoice
from crossview.attention.match.choose import choose_backend as choose_backend
from crossview.attention.match.choose import get_backend as get_backend
from crossview.attention.match.choose import set_backend as set_backend
from crossview.attention.match.choose import unavailable_reason as unavailable_reason
from crossview.attention.match.choose import using_backend as using_backend
from crossview.attention.match.function import match_attention as match_attention
