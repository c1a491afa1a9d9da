"""``crossview.stereo_stream``: one StereoResult per pair, read lazily, each warm-started from
the previous frame's answer (its initial field reaches the network), or cold when asked."""

from __future__ import annotations

import doctest
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest
import torch
from PIL import Image

import crossview
from crossview import streams
from crossview.models.dense.inference import init_tokens
from crossview.models.matchstereo import MatchStereo
from small_networks import SMALL

H, W = 192, 224


def _pairs(count: int) -> list[tuple[np.ndarray, np.ndarray]]:
    rng = np.random.default_rng(7)
    wide = rng.integers(0, 256, (H, W + 8 + count, 3), dtype=np.uint8)
    return [(wide[:, i + 8: i + 8 + W], wide[:, i + 4: i + 4 + W]) for i in range(count)]


def _model() -> tuple[MatchStereo, list[torch.Tensor | None]]:
    """A small random network recording the ``init_field`` of every pass."""
    torch.manual_seed(0)
    model = MatchStereo(SMALL).eval()
    inits: list[torch.Tensor | None] = []
    forward = model.forward_fields

    def spy(img0: torch.Tensor, img1: torch.Tensor, task: str = "stereo",
            init_field: torch.Tensor | None = None) -> dict[str, object]:
        inits.append(None if init_field is None else init_field.clone())
        return forward(img0, img1, task=task, init_field=init_field)

    model.forward_fields = spy
    return model, inits


def test_it_is_exported_lazily() -> None:
    assert crossview.stereo_stream is streams.stereo_stream
    assert "stereo_stream" in crossview.__all__ and "stereo_stream" in dir(crossview)


def test_one_result_per_pair_read_one_pair_at_a_time() -> None:
    read: list[int] = []

    def camera() -> Iterator[tuple[np.ndarray, np.ndarray]]:
        for i, pair in enumerate(_pairs(3)):
            read.append(i)
            yield pair

    model, _ = _model()
    stream = crossview.stereo_stream(camera(), model=model)
    assert read == []  # nothing runs before the first result is asked for
    first = next(stream)
    assert read == [0] and first.disparity.shape == (1, H, W)
    assert isinstance(first, crossview.api.StereoResult)
    assert len(list(stream)) == 2 and read == [0, 1, 2]


def test_the_previous_answer_starts_the_next_frame() -> None:
    """Frame i's network starts from frame i - 1's disparity of both views, on its token
    grid; warm_start=False leaves every frame to the network's own initialisation."""
    model, inits = _model()
    results = list(crossview.stereo_stream(_pairs(3), model=model))
    assert inits[0] is None and len(inits) == 3
    for init, previous in zip(inits[1:], results[:-1], strict=True):
        want = init_tokens(crossview.api.disparity_fields(previous), H, W)
        torch.testing.assert_close(init, want)
        assert init.shape == (2, H // 32, W // 32, 2)
    model, inits = _model()
    list(crossview.stereo_stream(_pairs(3), model=model, warm_start=False))
    assert inits == [None, None, None]


def test_the_first_frame_is_estimate_disparity() -> None:
    model, _ = _model()
    left, right = _pairs(1)[0]
    [streamed] = crossview.stereo_stream([(left, right)], model=model)
    alone = crossview.estimate_disparity(left, right, model=model)
    torch.testing.assert_close(streamed.disparity, alone.disparity)


def test_paths_and_pil_images_are_frames(tmp_path: Path) -> None:
    model, _ = _model()
    left, right = _pairs(1)[0]
    Image.fromarray(left).save(tmp_path / "l.png")
    results = list(crossview.stereo_stream(
        [(tmp_path / "l.png", Image.fromarray(right)), (str(tmp_path / "l.png"), right)],
        model=model, fuse=False))
    assert [tuple(r.disparity.shape) for r in results] == [(1, H, W)] * 2


def test_errors() -> None:
    model, _ = _model()
    left, right = _pairs(1)[0]
    for given in ("init", "row_offset"):
        with pytest.raises(TypeError, match=r"sets init .* and row_offset .* itself"):
            next(crossview.stereo_stream([(left, right)], model=model, **{given: None}))
    stream = crossview.stereo_stream([(left, right), (left, right[:, :-32])], model=model)
    next(stream)
    with pytest.raises(crossview.errors.UserError, match="differ in size"):
        next(stream)


def test_the_docstring_example_runs(monkeypatch: pytest.MonkeyPatch) -> None:
    """The example (the bundled default model) as written, made faster with the small network
    in its place."""
    model, _ = _model()
    monkeypatch.setattr(streams.api, "load_model", lambda *args, **kwargs: model)
    finder = doctest.DocTestFinder()
    [test] = [t for t in finder.find(streams) if t.name.endswith("stereo_stream")]
    result = doctest.DocTestRunner(optionflags=doctest.ELLIPSIS).run(test)
    assert result.failed == 0 and result.attempted > 0
