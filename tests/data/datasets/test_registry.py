from __future__ import annotations

import inspect
from pathlib import Path

import numpy as np
import pytest

from crossview.data import io
from crossview.data.datasets import (
    DatasetKind,
    get_dataset_kind,
    list_datasets,
    open_dataset,
    parse_dataset_spec,
    register_dataset,
    registry,
)
from crossview.errors import UserError
from crossview.metrics import get_metrics


def test_parse_spec() -> None:
    assert parse_dataset_spec("kitti2015:/data/kitti") == ("kitti2015", {}, "/data/kitti")
    assert parse_dataset_spec("sintel,pass=final,x=1:/a:b") == (
        "sintel", {"pass_": "final", "x": "1"}, "/a:b")
    assert parse_dataset_spec("synthetic-stereo") == ("synthetic-stereo", {}, None)
    with pytest.raises(UserError, match="KEY=VALUE"):
        parse_dataset_spec("sintel,final:/a")


def test_open_passes_options_and_checks_them(tmp_path: Path, write_image, mkparent) -> None:
    for i in (1, 2):
        io.write_flo(mkparent(tmp_path / "data" / f"{i:05d}_flow.flo"),
                     np.zeros((6, 8, 2), np.float32))
        write_image(tmp_path / "data" / f"{i:05d}_img1.ppm")
        write_image(tmp_path / "data" / f"{i:05d}_img2.ppm")
    dataset, kind = open_dataset(f"chairs,split=all:{tmp_path}")
    assert len(dataset) == 2 and kind.task == "flow" and kind.reduction == "pooled"
    with pytest.raises(UserError, match="has no option colour; options: split"):
        open_dataset(f"chairs,colour=red:{tmp_path}")
    with pytest.raises(UserError, match="needs a path"):
        open_dataset("chairs")
    with pytest.raises(UserError, match=r"unknown dataset kind 'kitty'.*kitti2015"):
        open_dataset("kitty:/x")
    with pytest.raises(UserError, match="no such directory"):
        open_dataset(f"kitti2015:{tmp_path / 'missing'}")


def test_every_kind_has_known_metrics_for_its_task() -> None:
    kinds = list_datasets()
    assert {"flyingthings3d", "driving", "monkaa", "middlebury", "kitti2012", "kitti2015",
            "kitti2015-flow", "eth3d", "sintel", "sintel-stereo", "chairs"} <= {
        kind.name for kind in kinds}
    for kind in kinds:
        assert len(get_metrics(kind.task, kind.metrics)) == len(kind.metrics)


def test_register_rejects_duplicates_and_serves_pathless_kinds(monkeypatch) -> None:
    # keep the registry clean: the test registers into a copy
    monkeypatch.setattr(registry.DATASETS, "_entries", dict(registry.DATASETS.entries))
    with pytest.raises(ValueError, match="already registered"):
        register_dataset(get_dataset_kind("chairs"))
    kind = DatasetKind("test-pathless", "stereo", lambda *, n="2": [{}] * int(n), ("epe",),
                       "pooled", "a test kind", needs_path=False)
    register_dataset(kind)
    dataset, found = open_dataset("test-pathless,n=3")
    assert len(dataset) == 3 and found is kind
    with pytest.raises(UserError, match="takes no path"):
        open_dataset("test-pathless:/x")


def test_every_option_of_every_kind_is_reachable_from_a_spec() -> None:
    # open_dataset passes options by keyword-only parameters: any other parameter after the
    # path could never be set from --dataset KIND,OPTION=VALUE:PATH
    for kind in list_datasets():
        parameters = list(inspect.signature(kind.factory).parameters.values())
        options = parameters[1:] if kind.needs_path else parameters
        assert all(p.kind == p.KEYWORD_ONLY for p in options), (kind.name, options)


def test_options_fixed_by_the_kind_cannot_contradict_it(tmp_path: Path) -> None:
    # kitti2015 is KITTIStereo with year=2015 bound: year=2012 would silently read KITTI 2012
    # under the 2015 name (and metric set)
    with pytest.raises(UserError, match=r"'kitti2015' is year=2015, not year=2012.*kitti2012"):
        open_dataset(f"kitti2015,year=2012:{tmp_path}")
    with pytest.raises(UserError, match=r"'kitti2012-flow' is year=2012, not year=15"):
        open_dataset(f"kitti2012-flow,year=15:{tmp_path}")
    with pytest.raises(UserError, match=r"'flyingthings3d' is subset=flyingthings3d, not "
                                        r"subset=driving.*use --dataset driving"):
        open_dataset(f"flyingthings3d,subset=driving:{tmp_path}")
    # the value the name already says is accepted (and the path is checked next)
    with pytest.raises(UserError, match="no such directory"):
        open_dataset(f"kitti2015,year=2015:{tmp_path / 'missing'}")
    # the options listed for a wrong one are those the user can set
    with pytest.raises(UserError, match=r"has no option colour; options: split, pass$"):
        open_dataset(f"flyingthings3d,colour=red:{tmp_path}")
