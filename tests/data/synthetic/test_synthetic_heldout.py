from __future__ import annotations

import pytest
import torch

from crossview.data.synthetic.dataset import sample_generator
from crossview.data.synthetic.flow import SyntheticFlow
from crossview.data.synthetic.heldout import HELDOUT_SEED, get_heldout, heldout_names
from crossview.data.synthetic.stereo import StereoConfig, SyntheticStereo
from crossview.errors import UserError


def test_names_and_defaults() -> None:
    assert {"synthetic-stereo", "synthetic-flow"} <= set(heldout_names())
    assert len(get_heldout("synthetic-stereo")) >= 100
    assert len(get_heldout("synthetic-flow")) >= 100


def test_heldout_is_fixed_and_not_a_training_stream() -> None:
    a = get_heldout("synthetic-stereo", length=2, size=(24, 48))[1]
    b = get_heldout("synthetic-stereo", length=2, size=(24, 48))[1]
    assert torch.equal(a["image0"], b["image0"])
    train = SyntheticStereo(2, seed=HELDOUT_SEED, config=StereoConfig(size=(24, 48)))[1]
    assert not torch.equal(train["image0"], a["image0"])
    # the generator keys differ in the split code, whatever the seed
    x = sample_generator("stereo", "heldout", HELDOUT_SEED, 1).random(4)
    y = sample_generator("stereo", "train", HELDOUT_SEED, 1).random(4)
    assert not (x == y).all()


@pytest.mark.parametrize("name", ["synthetic-flow", "synthetic-warp"])
def test_other_benchmarks_give_samples(name: str) -> None:
    ds = get_heldout(name, length=1, size=(24, 32))
    sample = ds[0]
    assert sample["flow"].shape == (2, 24, 32) and ds.split == "heldout"
    if name == "synthetic-flow":
        assert isinstance(ds, SyntheticFlow)
    else:
        assert sample["keypoints0"].shape == (64, 2)


def test_unknown_name_and_bad_sizes_are_user_errors() -> None:
    with pytest.raises(UserError, match="synthetic-stereo"):
        get_heldout("synthetic-chairs")
    with pytest.raises(UserError, match="size"):
        get_heldout("synthetic-flow", size=(8, 8))
