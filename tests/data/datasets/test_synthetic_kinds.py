from __future__ import annotations

import numpy as np
import pytest
import torch

from crossview.data.datasets import open_dataset
from crossview.data.synthetic.heldout import get_heldout
from crossview.errors import UserError
from crossview.eval import evaluate
from crossview.metrics import get_metrics


@pytest.mark.parametrize("name", ["synthetic-stereo", "synthetic-flow"])
def test_heldout_kinds_open_by_name_with_options(name: str) -> None:
    dataset, kind = open_dataset(f"{name},length=2,size=32x48")
    reference = get_heldout(name, length=2, size=(32, 48))
    assert len(dataset) == 2 and kind.task == name.split("-")[1]
    for key, value in reference[1].items():
        torch.testing.assert_close(dataset[1][key], value)


def test_heldout_ground_truth_scores_perfectly() -> None:
    dataset, kind = open_dataset("synthetic-flow,length=2,size=32x48")
    result = evaluate(dataset, lambda sample: sample["flow"], get_metrics(kind.task, kind.metrics),
                      reduction=kind.reduction)
    assert result.mean()["epe"] == 0.0 and result.mean()["1px"] == 100.0
    assert [name for name, _ in result.rows] == ["0", "1"]
    assert np.isfinite(list(result.mean().values())).all()


def test_bad_options() -> None:
    with pytest.raises(UserError, match="HxW"):
        open_dataset("synthetic-stereo,size=32")
    with pytest.raises(UserError, match="positive integer"):
        open_dataset("synthetic-stereo,length=two")
    with pytest.raises(UserError, match="takes no path"):
        open_dataset("synthetic-flow:/data")
