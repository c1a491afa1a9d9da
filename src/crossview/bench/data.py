"""Throughput of the synthetic data generators (samples per second, one thread).

Every case generates ``count`` consecutive samples of a training stream (after ``warmup``
untimed ones, which also load the photographs) through the public torch Datasets, so the
numbers include the numpy -> torch conversion a DataLoader worker would do. torch runs with
one intra-op thread during the benchmark; numpy's element-wise work is single-threaded anyway.
Wall-clock and process CPU time are both reported: on a busy machine the CPU-time rate is the
better estimate of what one free core delivers.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from typing import Any

from crossview.bench.measure import torch_threads
from crossview.data.augment import flow_augmentor, stereo_augmentor
from crossview.data.synthetic.dataset import SyntheticDataset
from crossview.data.synthetic.flow import FlowConfig, SyntheticFlow
from crossview.data.synthetic.multiview import MultiViewConfig, SyntheticMultiView
from crossview.data.synthetic.stereo import StereoConfig, SyntheticStereo
from crossview.data.synthetic.warps import SyntheticWarps, WarpConfig

CASES = ("stereo", "stereo+augment", "flow", "flow+augment", "warp", "multiview")


def make_dataset(case: str, size: tuple[int, int], length: int, views: int = 4
                 ) -> SyntheticDataset:
    """The training dataset timed by ``case`` (one of :data:`CASES`) at ``size = (H, W)``."""
    crop = (size[0] * 3 // 4, size[1] * 3 // 4)
    if case == "stereo":
        return SyntheticStereo(length, config=StereoConfig(size=size))
    if case == "stereo+augment":
        return SyntheticStereo(length, config=StereoConfig(size=size),
                               transform=stereo_augmentor(crop))
    if case == "flow":
        return SyntheticFlow(length, config=FlowConfig(size=size))
    if case == "flow+augment":
        return SyntheticFlow(length, config=FlowConfig(size=size), transform=flow_augmentor(crop))
    if case == "warp":
        return SyntheticWarps(length, config=WarpConfig(size=size, num_keypoints=64))
    if case == "multiview":
        return SyntheticMultiView(length, config=MultiViewConfig(size=size, views=views))
    raise ValueError(f"case must be one of {CASES}, got {case!r}")


def bench_data(cases: Sequence[tuple[str, tuple[int, int]]], count: int, *, warmup: int = 3,
               views: int = 4, on_sample: Callable[[str], None] | None = None
               ) -> list[dict[str, Any]]:
    """Time ``count`` samples of each ``(case, (H, W))``; one row per case."""
    rows = []
    with torch_threads(1):
        for case, size in cases:
            dataset = make_dataset(case, size, warmup + count, views)
            for i in range(warmup):
                dataset[i]
            wall0, cpu0 = time.perf_counter(), time.process_time()
            for i in range(warmup, warmup + count):
                dataset[i]
                if on_sample is not None:
                    on_sample(case)
            wall, cpu = time.perf_counter() - wall0, time.process_time() - cpu0
            rows.append({"case": case, "size": f"{size[0]}x{size[1]}", "samples": count,
                         "wall_s": wall, "per_s_wall": count / wall,
                         "per_s_cpu": count / max(cpu, 1e-9),
                         "views": views if case == "multiview" else None})
    return rows
