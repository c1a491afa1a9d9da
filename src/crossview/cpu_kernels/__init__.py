"""crossview's C++ CPU kernels and how they are built: one torch extension compiled on first use
for this machine (the fused MatchAttention of :mod:`crossview.attention.match` and the
colour-weighted median of :mod:`crossview.geometry.edge_weighted_median`).

The files, each importing only files listed above it:

- ``build_key.py``: the key that names one build (sources, compiler, flags, torch, CPU);
- ``build_lock.py``: waiting for, or clearing, the lock of a compile in progress or killed;
- ``cpu_build.py``: building (on first use) and loading the kernels of ``csrc/``.
"""
