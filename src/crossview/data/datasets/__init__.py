"""Readers for the stereo, optical-flow and semantic benchmarks, in their released layouts.

One module per family (:mod:`.sceneflow`, :mod:`.middlebury`, :mod:`.kitti`, :mod:`.eth3d`,
:mod:`.sintel`, :mod:`.chairs`, :mod:`.spair`, :mod:`.pfpascal`, :mod:`.pfwillow`), plus
:mod:`.scenes` for folders of real scenes in a generic layout and :mod:`.synthetic` for the
generated held-out benchmarks; the sample dict keys are documented in :mod:`.base`. Each module
registers its dataset kinds (with the metrics its benchmark reports) at its end; the kinds and
``KIND:PATH`` parsing live in :mod:`.registry`, which finds every reader module on the first
lookup. The readers' classes are re-exported here for convenience. The streams of unlabelled
real crops for self-supervised training (:mod:`.image_sequences` for flow, :mod:`.stereo_pairs`
for stereo, sharing :mod:`.crop_stream`) are not benchmarks and register no kind.
"""

from __future__ import annotations

from crossview.data.datasets.base import BenchmarkDataset, Sample
from crossview.data.datasets.chairs import FlyingChairs
from crossview.data.datasets.eth3d import ETH3D
from crossview.data.datasets.kitti import KITTIFlow, KITTIStereo
from crossview.data.datasets.middlebury import Middlebury
from crossview.data.datasets.pfpascal import PFPascal
from crossview.data.datasets.pfwillow import PFWillow
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
from crossview.data.datasets.spair import SPair71k
from crossview.data.datasets.synthetic import heldout_factory

__all__ = [
    "ETH3D",
    "BenchmarkDataset",
    "DatasetKind",
    "FlyingChairs",
    "KITTIFlow",
    "KITTIStereo",
    "Middlebury",
    "PFPascal",
    "PFWillow",
    "SPair71k",
    "Sample",
    "SceneFlowFlow",
    "SceneFlowStereo",
    "SceneFolders",
    "SintelFlow",
    "SintelStereo",
    "get_dataset_kind",
    "heldout_factory",
    "list_datasets",
    "open_dataset",
    "parse_dataset_spec",
    "register_dataset",
]
