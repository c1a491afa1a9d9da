"""The synthetic scene engine: seeded, procedural, unlimited data with exact ground truth.

Modules: ``textures`` (procedural noise, skies, scikit-image photographs), ``scene`` (layered
planar scenes rendered by inverse mapping), ``objects`` (random scene content), ``street``
(street layouts), ``stereo``, ``flow``, ``multiview``, ``warps`` (sample generators and torch
datasets), ``heldout`` (the fixed-seed held-out benchmarks). See docs/synthetic.md.
"""
