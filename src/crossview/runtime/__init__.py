"""The fused default stereo model without torch: an ONNX file of its network
(``crossview export onnx --model matchstereo-hybrid --size HxW -o FILE``) completed with numpy,
OpenCV and onnxruntime to what ``crossview stereo`` gives (docs/export.md,
docs/results/onnx-runtime); and the network's self-fused answer (``crossview stereo
--self-fuse``) from a file of the network's runs (``--self-fuse``).

- :mod:`~crossview.runtime.stereo`: :class:`FusedStereo`, the run (row alignment, network,
  SGBM fusion);
- :mod:`~crossview.runtime.self_fused`: :class:`SelfFusedStereo`, the network on the pair and
  its mirror image at two scales, the runs and the views fused with each other;
- :mod:`~crossview.runtime.fused_file`: what the file records for it;
- :mod:`~crossview.runtime.images`: the pair, read and checked;
- :mod:`~crossview.runtime.session`: the onnxruntime session;
- ``python -m crossview.runtime FILE LEFT RIGHT -o DISPARITY.npy``: the command
  (:mod:`crossview.runtime.__main__`).

Nothing here imports torch or scipy (tests/export/test_runtime.py checks it), so the runtime
runs where only ``numpy``, ``opencv-python-headless`` and ``onnxruntime`` are installed.
"""

from __future__ import annotations

from crossview.runtime.self_fused import SelfFusedStereo
from crossview.runtime.stereo import FusedStereo, StereoResult

__all__ = ["FusedStereo", "SelfFusedStereo", "StereoResult"]
