"""Readers for the stereo and optical-flow benchmarks, in their released directory layouts.

One module per family (:mod:`.sceneflow`, :mod:`.middlebury`, :mod:`.kitti`, :mod:`.eth3d`,
:mod:`.sintel`, :mod:`.chairs`), plus :mod:`.scenes` for folders of real scenes in a generic
layout; the sample dict keys are documented in :mod:`.base`; dataset
kinds, ``KIND:PATH`` parsing and each benchmark's metric set live in :mod:`.registry`.
"""

from __future__ import annotations

from crossview.data.datasets.base import BenchmarkDataset, Sample
from crossview.data.datasets.chairs import FlyingChairs
from crossview.data.datasets.eth3d import ETH3D
from crossview.data.datasets.kitti import KITTIFlow, KITTIStereo
from crossview.data.datasets.middlebury import Middlebury
from crossview.data.datasets.registry import (
    DatasetKind,
    get_dataset_kind,
    list_datasets,
    open_dataset,
    parse_dataset_spec,
    register_dataset,
)
from crossview.data.datasets.sceneflow import SceneFlowFlow, SceneFlowStereo
from crossview.data.datasets.scenes import SceneFolders
from crossview.data.datasets.sintel import SintelFlow, SintelStereo

__all__ = [
    "ETH3D",
    "BenchmarkDataset",
    "DatasetKind",
    "FlyingChairs",
    "KITTIFlow",
    "KITTIStereo",
    "Middlebury",
    "Sample",
    "SceneFlowFlow",
    "SceneFlowStereo",
    "SceneFolders",
    "SintelFlow",
    "SintelStereo",
    "get_dataset_kind",
    "list_datasets",
    "open_dataset",
    "parse_dataset_spec",
    "register_dataset",
]
