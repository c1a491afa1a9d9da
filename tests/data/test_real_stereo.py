"""Real stereo scenes as training data: the right view's labels by forward warping, held-out
scenes stay out, samples are pure functions of the index, both views are labelled, the pairs
read as flow (swapped and transposed at random) carry flows that map each frame onto the
other, and the synthetic/real mixture keeps its proportion."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch

from crossview.data import io
from crossview.data.augment import flow_augmentor, stereo_augmentor
from crossview.data.real_stereo import (
    MixedStream,
    RealStereoTraining,
    RealStereoValidation,
    right_view_disparity,
)
from crossview.errors import UserError

SIZE = (40, 72)


def _scene(folder: Path, rng: np.random.Generator, disparity: float) -> None:
    folder.mkdir(parents=True)
    left = rng.integers(0, 256, (*SIZE, 3), dtype=np.uint8)
    shift = int(disparity)
    io.write_image(folder / "left.png", left)
    io.write_image(folder / "right.png", np.roll(left, -shift, axis=1))
    truth = np.full(SIZE, disparity, np.float32)
    truth[:2] = np.nan
    io.write_npy(folder / "gt.npy", truth)


@pytest.fixture
def root(tmp_path: Path) -> Path:
    rng = np.random.default_rng(0)
    for name, disparity in (("a", 3.0), ("b", 5.0), ("c", 7.0)):
        _scene(tmp_path / name, rng, disparity)
    return tmp_path


def test_training_never_reads_a_held_out_scene(root: Path) -> None:
    data = RealStereoTraining(root, 50, seed=1, holdout=["b"])
    assert data.names == ["a", "c"]
    seen = {float(data[i]["disparity"][5, 5]) for i in range(len(data))}
    assert seen == {3.0, 7.0}


def test_samples_are_a_pure_function_of_seed_and_index(root: Path) -> None:
    crop = stereo_augmentor((32, 64))
    first = RealStereoTraining(root, 10, seed=4, transform=crop)
    again = RealStereoTraining(root, 10, seed=4, transform=crop)
    other = RealStereoTraining(root, 10, seed=5, transform=crop)
    for key in first[3]:
        torch.testing.assert_close(first[3][key], again[3][key], rtol=0, atol=0)
    assert not torch.equal(first[3]["image0"], other[3]["image0"])
    assert first[3]["image0"].shape == (3, 32, 64) and first[3]["valid1"].shape == (32, 64)


def test_both_views_are_labelled(root: Path) -> None:
    sample = RealStereoTraining(root, 3, seed=0, holdout=["b", "c"])[0]
    assert set(sample) == {"image0", "image1", "disparity", "disparity1", "valid", "valid1"}
    assert not sample["valid"][:2].any() and sample["valid"][2:].all()
    # a fronto-parallel scene: the right view sees the same disparity except its last columns
    assert sample["valid1"][2:, :-3].all() and not sample["valid1"][:, -3:].any()
    assert (sample["disparity1"][sample["valid1"]] == 3.0).all()
    assert sample["image0"].dtype == torch.float32 and sample["image0"].max() <= 255


def test_validation_serves_held_out_scenes_cropped_to_multiples_of_32(root: Path) -> None:
    data = RealStereoValidation(root, ["c", "a"])
    assert data.names == ["a", "c"] and len(data) == 2
    assert data[0]["image0"].shape == (3, 32, 64) and data[1]["disparity"].shape == (32, 64)


def _lands_on_its_match(image0: torch.Tensor, image1: torch.Tensor, flow: torch.Tensor,
                        valid: torch.Tensor) -> int:
    """Checks ``image1[p + flow(p)] == image0[p]`` at every known pixel whose integer match is
    inside; returns how many pixels were checked."""
    h, w = valid.shape
    ys, xs = torch.nonzero(valid, as_tuple=True)
    tx = xs + flow[0, ys, xs].round().long()
    ty = ys + flow[1, ys, xs].round().long()
    inside = (tx >= 0) & (tx < w) & (ty >= 0) & (ty < h)
    ys, xs, tx, ty = ys[inside], xs[inside], tx[inside], ty[inside]
    torch.testing.assert_close(image1[:, ty, tx], image0[:, ys, xs], rtol=0, atol=0)
    return int(inside.sum())


def test_flow_samples_map_each_frame_onto_the_other_in_every_orientation(root: Path) -> None:
    data = RealStereoTraining(root, 40, seed=2, holdout=["b", "c"], task="flow")
    orientations = set()
    for i in range(len(data)):
        sample = data[i]
        assert set(sample) == {"image0", "image1", "flow", "flow_backward", "valid", "valid1"}
        for flow, valid in ((sample["flow"], sample["valid"]),
                            (sample["flow_backward"], sample["valid1"])):
            known = flow[:, valid]
            assert known.shape[1] > 0 and (known == known[:, :1]).all()  # one motion
            u, v = (float(c) for c in known[:, 0])
            assert sorted((abs(u), abs(v))) == [0.0, 3.0]
        orientations.add(tuple(float(c) for c in sample["flow"][:, sample["valid"]][:, 0]))
        assert _lands_on_its_match(sample["image0"], sample["image1"], sample["flow"],
                                   sample["valid"]) > 0
        assert _lands_on_its_match(sample["image1"], sample["image0"],
                                   sample["flow_backward"], sample["valid1"]) > 0
    assert orientations == {(-3.0, 0.0), (3.0, 0.0), (0.0, -3.0), (0.0, 3.0)}


def test_flow_samples_are_cropped_by_the_flow_augmentation(root: Path) -> None:
    data = RealStereoTraining(root, 6, seed=3, task="flow", transform=flow_augmentor((32, 64)))
    for i in range(len(data)):
        sample = data[i]
        assert sample["image0"].shape == (3, 32, 64)
        assert sample["flow_backward"].shape == (2, 32, 64)
        known = sample["flow"][:, sample["valid"]]
        # rescaled and flipped, the motion stays along one axis and non-zero
        assert ((known[0] == 0) | (known[1] == 0)).all() and (known.abs().sum(0) > 1).all()


def test_flow_validation_keeps_the_left_image_first(root: Path) -> None:
    data = RealStereoValidation(root, ["a"], task="flow")
    sample = data[0]
    assert sample["flow"].shape == (2, 32, 64)
    assert (sample["flow"][:, sample["valid"]] == torch.tensor([[-3.0], [0.0]])).all()


def test_an_unknown_task_is_refused(root: Path) -> None:
    with pytest.raises(ValueError, match="task must be one of"):
        RealStereoTraining(root, 3, task="depth")


@pytest.mark.parametrize(("holdout", "message"), [
    (["x"], "no scene named x"),
    (["a", "b", "c"], "every scene is held out"),
])
def test_bad_holdout_is_one_clear_error(root: Path, holdout: list[str], message: str) -> None:
    with pytest.raises(UserError, match=message):
        RealStereoTraining(root, 3, holdout=holdout)


@pytest.mark.parametrize("fraction", [0.0, 0.25, 0.5, 1.0])
def test_mixture_takes_its_share_in_order(fraction: float) -> None:
    first, second = list(range(100)), list(range(1000, 1040))
    mixed = MixedStream(first, second, fraction)
    items = [mixed[i] for i in range(40)]
    from_second = [v for v in items if v >= 1000]
    assert len(from_second) == round(40 * fraction)
    assert from_second == second[:len(from_second)]  # each part read in order, none repeated
    assert [v for v in items if v < 1000] == first[:40 - len(from_second)]


def test_mixture_refuses_a_fraction_outside_0_1() -> None:
    with pytest.raises(ValueError, match="fraction must be in"):
        MixedStream([1], [2], 1.5)


def _right_view_naive(disparity: np.ndarray, valid: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    h, w = disparity.shape
    best = np.full((h, w), -np.inf)
    for y in range(h):
        for x in range(w):
            if not valid[y, x]:
                continue
            d = disparity[y, x]
            for target in {int(np.floor(x - d)), int(np.ceil(x - d))}:
                if 0 <= target < w:
                    best[y, target] = max(best[y, target], d)
    known = np.isfinite(best)
    return np.where(known, best, 0.0), known


@pytest.mark.parametrize("seed", range(4))
def test_right_view_disparity_equals_the_splat_pixel_by_pixel(seed: int) -> None:
    rng = np.random.default_rng(seed)
    disparity = rng.uniform(0, 9, (5, 17)).astype(np.float32)
    valid = rng.random((5, 17)) < 0.8
    right, known = right_view_disparity(disparity, valid)
    expected, expected_known = _right_view_naive(disparity, valid)
    np.testing.assert_array_equal(known, expected_known)
    np.testing.assert_allclose(right, expected, rtol=0, atol=0)


def test_right_view_disparity_round_trips_a_fronto_parallel_plane() -> None:
    """A constant disparity d: the right view sees the same d, on all but its last d columns
    (seen by no left pixel)."""
    disparity = np.full((3, 20), 4.0, np.float32)
    right, known = right_view_disparity(disparity, np.ones_like(disparity, bool))
    assert known[:, :16].all() and not known[:, 16:].any()
    np.testing.assert_array_equal(right[:, :16], 4.0)


def test_right_view_disparity_keeps_the_nearest_surface() -> None:
    """Two left pixels land on one right pixel: the larger disparity (in front) wins."""
    disparity = np.array([[0.0, 0.0, 0.0, 3.0, 0.0]], np.float32)
    right, _ = right_view_disparity(disparity, np.ones_like(disparity, bool))
    assert right[0, 0] == 3.0


def test_right_view_disparity_refuses_mismatched_shapes() -> None:
    with pytest.raises(ValueError, match="disparity and valid must both be"):
        right_view_disparity(np.zeros((2, 3)), np.zeros((3, 2), bool))
