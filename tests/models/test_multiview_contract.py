"""The multi-view contract: both multi-view networks keep it, their inputs name their samples'
keys, and the predictor gives the network's prediction for one sample."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from crossview.models.multiview import MultiViewConfig, MultiViewTransformer
from crossview.models.multiview.contract import is_multiview, view_predictor
from crossview.models.multiview.depth import MultiViewDepth
from crossview.models.transformatcher.model import TransforMatcher

CONFIG = MultiViewConfig(depth=1, width=16, heads=2)


def _sample(inputs: tuple[str, ...], views: int) -> dict[str, np.ndarray]:
    """Unbatched inputs: ``views`` views (images for the first half of a novel-view sample),
    cameras 1 unit apart along x."""
    rng = np.random.default_rng(0)
    K = np.array([[32.0, 0, 16], [0, 32, 16], [0, 0, 1]], np.float32)
    poses = np.repeat(np.eye(4, dtype=np.float32)[None], views, axis=0)
    poses[:, 0, 3] = -np.arange(views)
    values = {"images": rng.uniform(0, 255, (views, 3, 32, 32)).astype(np.float32),
              "K": np.repeat(K[None], views, 0), "viewmats": poses}
    half = views // 2
    values.update({"context_images": values["images"][:half], "context_K": values["K"][:half],
                   "context_viewmats": poses[:half], "target_K": values["K"][half:],
                   "target_viewmats": poses[half:]})
    return {key: values[key] for key in inputs}


@pytest.mark.parametrize(("network", "shape"), [(MultiViewTransformer, (2, 3, 32, 32)),
                                                (MultiViewDepth, (4, 32, 32))])
def test_networks_keep_the_contract_and_predict_every_view(network: type,
                                                           shape: tuple[int, ...]) -> None:
    torch.manual_seed(0)
    model = network(CONFIG).eval()
    assert is_multiview(model) and model.config == CONFIG
    sample = _sample(model.inputs, 4)
    with torch.no_grad():
        predicted = view_predictor(model)(sample)
        direct = model(*(torch.from_numpy(sample[key])[None] for key in model.inputs))[0]
    assert predicted.shape == shape and predicted.dtype == np.float32
    np.testing.assert_array_equal(predicted, direct.numpy())


def test_a_network_of_another_kind_is_refused() -> None:
    assert not is_multiview(TransforMatcher(grid=3))
    with pytest.raises(TypeError, match="TransforMatcher is no multi-view network"):
        view_predictor(TransforMatcher(grid=3))
