from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from crossview.data import io
from crossview.data.datasets import SintelFlow, SintelStereo
from crossview.data.datasets.sintel import decode_disparity
from crossview.errors import UserError

H, W = 6, 8


@pytest.mark.parametrize("pass_", ["clean", "final"])
def test_flow(tmp_path: Path, pass_: str, write_image, write_mask, rng, mkparent) -> None:
    training = tmp_path / "training"
    frames = [write_image(training / pass_ / "alley_1" / f"frame_{i:04d}.png")
              for i in (1, 2, 3)]
    flows = []
    for i in (1, 2):
        flow = rng.normal(0, 3, (H, W, 2)).astype(np.float32)
        io.write_flo(mkparent(training / "flow" / "alley_1" / f"frame_{i:04d}.flo"), flow)
        flows.append(flow)
    occluded = np.zeros((H, W), np.uint8)
    occluded[0] = 255
    invalid = np.zeros((H, W), np.uint8)
    invalid[:, 0] = 255
    write_mask(training / "occlusions" / "alley_1" / "frame_0002.png", occluded)
    write_mask(training / "invalid" / "alley_1" / "frame_0002.png", invalid)

    dataset = SintelFlow(tmp_path, pass_=pass_)
    assert len(dataset) == 2
    first, second = dataset[0], dataset[1]
    assert second["name"] == "alley_1/frame_0002.png"
    np.testing.assert_array_equal(second["image0"], frames[1])
    np.testing.assert_array_equal(second["image1"], frames[2])
    np.testing.assert_array_equal(second["flow"], flows[1])
    np.testing.assert_array_equal(second["valid"], invalid == 0)
    np.testing.assert_array_equal(second["valid_noc"], (invalid == 0) & (occluded == 0))
    assert first["valid"].all() and first["valid_noc"].all()  # masks absent: nothing set


def test_disparity_encoding_hand_computed() -> None:
    encoded = np.array([[[10, 32, 0], [255, 63, 0], [1, 0, 128], [255, 255, 255]]], np.uint8)
    decoded = decode_disparity(encoded)
    assert decoded.dtype == np.float32
    # the blue channel holds the finest bits (1/2**14 px), exactly representable in float32
    np.testing.assert_array_equal(decoded, [[40.5, 1020 + 63 / 64, 4 + 128 / 2**14,
                                             1020 + 255 / 64 + 255 / 2**14]])


def test_stereo(tmp_path: Path, write_image, write_mask, rng, mkparent) -> None:
    training = tmp_path / "training"
    left = write_image(training / "final_left" / "cave_2" / "frame_0001.png")
    right = write_image(training / "final_right" / "cave_2" / "frame_0001.png")
    disparity = np.floor(rng.uniform(0, 200, (H, W)) * 2**14) / 2**14  # exactly representable
    encoded = np.zeros((H, W, 3), np.uint8)
    encoded[..., 0] = np.floor(disparity / 4)
    encoded[..., 1] = np.floor(disparity * 2**6) % 256
    encoded[..., 2] = np.floor(disparity * 2**14) % 256
    io.write_image(mkparent(training / "disparities" / "cave_2" / "frame_0001.png"), encoded)
    outofframe = np.zeros((H, W), np.uint8)
    outofframe[:, -2:] = 1
    occluded = np.zeros((H, W), np.uint8)
    occluded[3, 3] = 1
    write_mask(training / "outofframe" / "cave_2" / "frame_0001.png", outofframe)
    write_mask(training / "occlusions" / "cave_2" / "frame_0001.png", occluded)

    with pytest.raises(UserError, match="found no samples"):
        SintelStereo(tmp_path)  # only the final pass exists
    sample = SintelStereo(tmp_path, pass_="final")[0]
    np.testing.assert_array_equal(sample["image0"], left)
    np.testing.assert_array_equal(sample["image1"], right)
    np.testing.assert_array_equal(sample["disparity"], disparity)
    np.testing.assert_array_equal(sample["valid"], outofframe == 0)
    np.testing.assert_array_equal(sample["valid_noc"], (outofframe == 0) & (occluded == 0))


def test_wrong_layout(tmp_path: Path) -> None:
    with pytest.raises(UserError, match=r"training/flow/SCENE/frame_NNNN\.flo"):
        SintelFlow(tmp_path)
    with pytest.raises(UserError, match="pass"):
        SintelStereo(tmp_path, pass_="albedo")


@pytest.mark.parametrize("stray", ["frame_abc.flo", "frame_0001_copy.flo", "frame_.flo"])
def test_stray_flow_file_is_named(tmp_path: Path, stray: str, write_image, rng,
                                  mkparent) -> None:
    """A file in training/flow that the frame_NNNN.flo pattern cannot number is one error naming
    it (skipping it would silently change the benchmark's sample count)."""
    training = tmp_path / "training"
    for i in (1, 2):
        write_image(training / "clean" / "alley_1" / f"frame_{i:04d}.png")
    flow = rng.normal(0, 3, (H, W, 2)).astype(np.float32)
    io.write_flo(mkparent(training / "flow" / "alley_1" / "frame_0001.flo"), flow)
    assert len(SintelFlow(tmp_path)) == 1
    (training / "flow" / "alley_1" / stray).write_bytes(b"")
    with pytest.raises(UserError, match=r"the name is not frame_NNNN\.flo") as caught:
        SintelFlow(tmp_path)
    assert str(training / "flow" / "alley_1" / stray) in str(caught.value)


@pytest.mark.parametrize("stray", ["frame_abc.png", "frame_0001 (1).png"])
def test_stray_disparity_file_is_named(tmp_path: Path, stray: str, write_image,
                                       mkparent) -> None:
    """The same for training/disparities: a stray there was silently skipped, or loaded as a
    sample when a left image of the same name existed."""
    training = tmp_path / "training"
    for name in ("frame_0001.png", stray):
        for side in ("clean_left", "clean_right"):
            write_image(training / side / "cave_2" / name)
        io.write_image(mkparent(training / "disparities" / "cave_2" / name),
                       np.zeros((H, W, 3), np.uint8))
    with pytest.raises(UserError, match=r"the name is not frame_NNNN\.png") as caught:
        SintelStereo(tmp_path)
    assert str(training / "disparities" / "cave_2" / stray) in str(caught.value)
    (training / "disparities" / "cave_2" / stray).unlink()
    assert len(SintelStereo(tmp_path)) == 1
