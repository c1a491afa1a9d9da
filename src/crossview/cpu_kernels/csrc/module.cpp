// The Python module of crossview's C++ CPU kernels (built by crossview/cpu_kernels/cpu_build.py).

#include <torch/extension.h>

#include "match_attention.h"
#include "weighted_median.h"

PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) {
  m.def("forward", &crossview::forward, "MatchAttention forward: (out, attn or empty)");
  m.def("backward", &crossview::backward,
        "MatchAttention backward: (grad_q, grad_k, grad_v, grad_rel_pos)");
  // without the GIL: the fusions run one view per thread
  m.def("weighted_median", &crossview::weighted_median,
        "colour-weighted median of values [H, W, C] at pixels [n]: [n, C]",
        py::call_guard<py::gil_scoped_release>());
}
