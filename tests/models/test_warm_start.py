"""A warm start (``init=`` of :func:`crossview.models.dense.inference.predict_fields` and
:func:`crossview.estimate_disparity`): a field in px of the pair becomes the network's initial
field on the token grid of the size the network actually runs at (plain, fixed size, and the
fused path's scale inside a working size), in place of the correlation and of lri's
half-resolution pass."""

from __future__ import annotations

import numpy as np
import pytest
import torch

import crossview
from crossview import api
from crossview.errors import UserError
from crossview.models.dense.inference import init_tokens, predict_fields
from crossview.models.matchstereo import MatchStereo
from crossview.models.matchstereo.specs import matchstereo_spec
from crossview.models.registry import FusedNetwork, register_model
from small_networks import SMALL

CAP = 120_000
register_model(matchstereo_spec("warm-start-fused-test", SMALL, "stereo", fuse=True,
                                fused_network=FusedNetwork(0.75, max_pixels=CAP)), replace=True)
pytestmark = pytest.mark.filterwarnings("ignore::crossview.api.RandomWeightsWarning")
DISPARITY = 12.0  # px of the warm start at the pair's size


def _spy(model: torch.nn.Module) -> list[tuple[tuple[int, ...], torch.Tensor | None]]:
    """Record ``(padded image shape, init_field)`` of every ``forward_fields`` call."""
    calls: list[tuple[tuple[int, ...], torch.Tensor | None]] = []
    forward = model.forward_fields

    def spy(img0: torch.Tensor, img1: torch.Tensor, task: str = "stereo",
            init_field: torch.Tensor | None = None) -> dict[str, object]:
        calls.append((tuple(img0.shape), None if init_field is None else init_field.clone()))
        return forward(img0, img1, task=task, init_field=init_field)

    model.forward_fields = spy
    return calls


def _images(h: int, w: int) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(0)
    left = rng.integers(0, 256, (h, w, 3), dtype=np.uint8)
    return left, np.roll(left, -4, axis=1)


def _init(h: int, w: int) -> torch.Tensor:
    """Both views' fields ``[2, h, w, 2]`` of a constant disparity."""
    x = torch.cat([torch.full((1, h, w), -DISPARITY), torch.full((1, h, w), DISPARITY)])
    return torch.stack([x, torch.zeros_like(x)], dim=-1)


def test_init_tokens_scale_to_the_run_size() -> None:
    tokens = init_tokens(_init(60, 80), 120, 100)  # twice as high, 1.25 times as wide
    assert tokens.shape == (2, 4, 4, 2)  # ceil32(120) / 32, ceil32(100) / 32
    torch.testing.assert_close(tokens[0, ..., 0], torch.full((4, 4), -DISPARITY * 1.25 / 32))
    torch.testing.assert_close(tokens[1, ..., 0], torch.full((4, 4), DISPARITY * 1.25 / 32))
    assert (tokens[..., 1] == 0).all()


@pytest.mark.parametrize("size,lri", [(None, False), (None, True), ((192, 256), False)])
def test_the_warm_start_reaches_the_network_at_its_run_size(
        size: tuple[int, int] | None, lri: bool) -> None:
    """One network pass (lri's half pass replaced) whose initial field is the warm start at
    the size the network runs at: the pair's own, or ``size``."""
    model = MatchStereo(SMALL).eval()
    calls = _spy(model)
    left, right = _images(384, 512)  # lri's half pass would run at 192x256
    fields = predict_fields(model, left, right, "stereo", size=size, lri=lri,
                            init=_init(384, 512))
    assert fields.field.shape == (2, 384, 512, 2)
    [(shape, init)] = calls
    run_w = 512 if size is None else size[1]
    assert shape[-2:] == ((384, 512) if size is None else size)
    assert init.shape == (2, shape[-2] // 32, shape[-1] // 32, 2)
    torch.testing.assert_close(init[0, ..., 0], torch.full(init.shape[1:3],
                                                            -DISPARITY * run_w / 512 / 32))


def test_the_fused_path_converts_at_its_working_size_and_scale() -> None:
    """A fused run of a large pair works at the working size (<= CAP pixels) and runs its
    network at 0.75 of that: the initial field is the warm start at that size."""
    model = crossview.load_model("warm-start-fused-test")
    calls = _spy(model)
    h, w = 384, 512  # working size 300x400 (120_000 pixels), network at 225x300
    left, right = _images(h, w)
    result = crossview.estimate_disparity(left, right, model=model,
                                          init=api.disparity_fields(
                                              crossview.estimate_disparity(left, right,
                                                                           model=model)))
    assert result.disparity.shape == (1, h, w)
    (_, cold), (shape, warm) = calls
    assert cold is None
    assert shape[-2:] == (256, 320)  # 225x300 padded
    run_w = 300
    assert warm.shape == (2, 8, 10, 2)
    # a constant warm start shows the gain exactly
    calls.clear()
    crossview.estimate_disparity(left, right, model=model, init=_init(h, w))
    [(_, init)] = calls
    torch.testing.assert_close(init[0, ..., 0], torch.full((8, 10), -DISPARITY * run_w / w / 32))


def test_disparity_fields_inverts_the_result() -> None:
    model = MatchStereo(SMALL).eval()
    left, right = _images(192, 224)
    result = crossview.estimate_disparity(left, right, model=model)
    field = api.disparity_fields(result)
    assert field.shape == (2, 192, 224, 2)
    torch.testing.assert_close(field[0, ..., 0], -result.disparity[0])
    torch.testing.assert_close(field[1, ..., 0], result.disparity_right[0])


def test_bad_warm_starts_are_refused() -> None:
    model = MatchStereo(SMALL).eval()
    left, right = _images(192, 224)
    with pytest.raises(ValueError, match=r"init must be both views' fields \[2B, H, W, 2\]"):
        predict_fields(model, left, right, "stereo", init=torch.zeros(1, 192, 224, 2))
    with pytest.raises(TypeError, match="init must be a tensor"):
        predict_fields(model, left, right, "stereo", init=np.zeros((2, 192, 224, 2)))
    model.accepts_init_field = False
    with pytest.raises(UserError, match="no warm start"):
        predict_fields(model, left, right, "stereo", init=_init(192, 224))
