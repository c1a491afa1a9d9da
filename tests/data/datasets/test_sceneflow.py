from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from crossview.data import io
from crossview.data.datasets import SceneFlowFlow, SceneFlowStereo
from crossview.errors import UserError

H, W = 6, 8

SEQUENCES = {
    "flyingthings3d": "TEST/A/0000",
    "driving": "15mm_focallength/scene_forwards/fast",
    "monkaa": "a_rain_of_stones_x2",
}


@pytest.fixture
def release(tmp_path: Path, write_image, rng, mkparent):
    """Write two frames (0006, 0007) of one sequence in the release layout; return the truth."""
    return lambda subset: _release(tmp_path, subset, write_image, rng, mkparent)


def _release(root: Path, subset: str, write_image, rng, mkparent) -> dict:
    seq = SEQUENCES[subset]
    truth: dict = {}
    for frame in ("0006", "0007"):
        for side in ("left", "right"):
            truth[("image", frame, side)] = write_image(
                root / "frames_cleanpass" / seq / side / f"{frame}.png")
            disparity = rng.uniform(0, 50, (H, W)).astype(np.float32)
            io.write_pfm(mkparent(root / "disparity" / seq / side / f"{frame}.pfm"), disparity)
            truth[("disparity", frame, side)] = disparity
            letter = side[0].upper()
            for direction, word in (("future", "Future"), ("past", "Past")):
                flow = rng.normal(0, 5, (H, W, 3)).astype(np.float32)
                flow[..., 2] = 0
                name = f"OpticalFlowInto{word}_{frame}_{letter}.pfm"
                io.write_pfm(mkparent(root / "optical_flow" / seq / f"into_{direction}" / side
                                      / name), flow)
                truth[("flow", frame, side, direction)] = flow[..., :2]
    return truth


@pytest.mark.parametrize("subset", list(SEQUENCES))
def test_stereo_reads_both_views(tmp_path: Path, subset: str, release) -> None:
    truth = release(subset)
    dataset = SceneFlowStereo(tmp_path, subset=subset)
    assert len(dataset) == 2 and dataset.task == "stereo"
    sample = dataset[1]
    assert sample["name"] == f"{SEQUENCES[subset]}/left/0007.png"
    np.testing.assert_array_equal(sample["image0"], truth[("image", "0007", "left")])
    np.testing.assert_array_equal(sample["image1"], truth[("image", "0007", "right")])
    np.testing.assert_array_equal(sample["disparity"], truth[("disparity", "0007", "left")])
    np.testing.assert_array_equal(sample["disparity1"], truth[("disparity", "0007", "right")])
    assert sample["valid"].all() and sample["valid1"].all()


@pytest.mark.parametrize("camera", ["left", "right"])
def test_flow_reads_both_directions(tmp_path: Path, camera: str, release) -> None:
    truth = release("monkaa")
    dataset = SceneFlowFlow(tmp_path, subset="monkaa", camera=camera)
    assert len(dataset) == 1 and dataset.task == "flow"
    sample = dataset[0]
    np.testing.assert_array_equal(sample["image0"], truth[("image", "0006", camera)])
    np.testing.assert_array_equal(sample["image1"], truth[("image", "0007", camera)])
    np.testing.assert_array_equal(sample["flow"], truth[("flow", "0006", camera, "future")])
    np.testing.assert_array_equal(sample["flow_backward"],
                                  truth[("flow", "0007", camera, "past")])
    assert sample["flow"].shape == (H, W, 2)


def test_non_finite_ground_truth_is_invalid_and_zeroed(tmp_path: Path, release) -> None:
    release("monkaa")
    path = tmp_path / "disparity" / SEQUENCES["monkaa"] / "left" / "0006.pfm"
    disparity = io.read_pfm(path)
    disparity[1, 2] = np.inf
    io.write_pfm(path, disparity)
    sample = SceneFlowStereo(tmp_path, subset="monkaa")[0]
    assert not sample["valid"][1, 2] and sample["valid"].sum() == H * W - 1
    assert sample["disparity"][1, 2] == 0


def test_wrong_layout_and_options_say_what_was_expected(tmp_path: Path, release) -> None:
    with pytest.raises(UserError, match="no such directory; expected a SceneFlow"):
        SceneFlowStereo(tmp_path / "missing")
    release("monkaa")
    with pytest.raises(UserError, match=r"found no samples; expected .*TEST"):
        SceneFlowStereo(tmp_path, subset="flyingthings3d")  # monkaa tree, things layout
    with pytest.raises(UserError, match="pass"):
        SceneFlowStereo(tmp_path, subset="monkaa", pass_="dirty")
    with pytest.raises(UserError, match="subset"):
        SceneFlowFlow(tmp_path, subset="chairs")


@pytest.mark.parametrize("stray", ["0006_copy.png", "0006 (1).png", "frame.png", "._0006.png"])
@pytest.mark.parametrize("reader", [SceneFlowStereo, SceneFlowFlow])
def test_stray_frame_file_is_named(tmp_path: Path, release, reader, stray: str) -> None:
    """A ``.png`` in a frames folder that is not ``NNNN.png`` is one error naming it (the flow
    reader used to skip it and the stereo reader to list it as a sample), as in Sintel."""
    release("monkaa")
    assert len(reader(tmp_path, subset="monkaa")) in (1, 2)
    path = tmp_path / "frames_cleanpass" / SEQUENCES["monkaa"] / "left" / stray
    path.write_bytes(b"")
    with pytest.raises(UserError, match=r"the name is not NNNN\.png") as caught:
        reader(tmp_path, subset="monkaa")
    assert str(path) in str(caught.value)


@pytest.mark.parametrize("reader", [SceneFlowStereo, SceneFlowFlow])
def test_other_files_beside_the_frames_are_not_frames(tmp_path: Path, release, reader) -> None:
    """Only ``.png`` files in a camera folder are frames: other files and folders there, and any
    file elsewhere in the release, leave the samples as they are."""
    release("monkaa")
    expected = reader(tmp_path, subset="monkaa").entries
    left = tmp_path / "frames_cleanpass" / SEQUENCES["monkaa"] / "left"
    for name in ("Thumbs.db", "notes.txt", "0006.webp"):
        (left / name).write_bytes(b"")
    (left / "extra.png").mkdir()
    (left.parent / "readme.png").write_bytes(b"")
    (tmp_path / "disparity" / SEQUENCES["monkaa"] / "left" / "copy.pfm").write_bytes(b"")
    assert reader(tmp_path, subset="monkaa").entries == expected
