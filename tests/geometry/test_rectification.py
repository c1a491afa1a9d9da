"""``crossview rectify``: a rectified pair, un-rectified by a known rig (each camera turned by a
small rotation), is rectified back: matching spots lie on one row again, the calibration it
writes gives the rig's baseline, and ``crossview stereo --calib`` reads it. Bad calibrations are
one error line, exit code 2, nothing written."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
import yaml

from cli_runner import run_cli
from crossview.data import io
from crossview.data.calibration import read_stereo_calibration
from crossview.data.rig_calibration import read_rig_calibration

cv2 = pytest.importorskip("cv2")

H, W = 240, 320
FOCAL, BASELINE, DISPARITY = 300.0, 0.12, 9.0  # px, metres, px (a fronto-parallel plane)
K = np.array([[FOCAL, 0, (W - 1) / 2], [0, FOCAL, (H - 1) / 2], [0, 0, 1]])
SPOTS = [(x, y) for y in range(40, H - 30, 40) for x in range(50, W - 40, 48)]


def _rotation(rx: float, ry: float, rz: float) -> np.ndarray:
    return cv2.Rodrigues(np.array([rx, ry, rz]))[0]


LEFT_TURN, RIGHT_TURN = _rotation(0.02, -0.03, 0.015), _rotation(-0.025, 0.02, -0.02)


def _spots(shift: float) -> np.ndarray:
    """A grey rectified image ``[H, W, 3]`` uint8: Gaussian spots at :data:`SPOTS` moved
    ``shift`` px left."""
    ys, xs = np.mgrid[0:H, 0:W].astype(np.float64)
    image = np.zeros((H, W))
    for x, y in SPOTS:
        image += np.exp(-((xs - x + shift) ** 2 + (ys - y) ** 2) / (2 * 2.0 ** 2))
    return np.repeat((np.clip(image, 0, 1) * 255).round().astype(np.uint8)[..., None], 3, 2)


def _unrectified_rig(folder: Path) -> dict[str, object]:
    """Write the pair as cameras turned by LEFT_TURN / RIGHT_TURN see it; return the rig:
    x_left = Ra X, x_right = Rb (X - C) with C = (BASELINE, 0, 0), so R = Rb Ra^T and
    T = -Rb C (OpenCV's x2 = R x1 + T)."""
    for name, image, turn in (("l.png", _spots(0.0), LEFT_TURN),
                              ("r.png", _spots(DISPARITY), RIGHT_TURN)):
        homography = K @ turn @ np.linalg.inv(K)  # rectified pixel -> turned camera's pixel
        io.write_image(folder / name, cv2.warpPerspective(image, homography, (W, H),
                                                          flags=cv2.INTER_LINEAR))
    return {"K1": K.tolist(), "D1": [0.0] * 5, "K2": K.tolist(), "D2": [0.0] * 5,
            "R": (RIGHT_TURN @ LEFT_TURN.T).tolist(),
            "T": (-RIGHT_TURN @ np.array([BASELINE, 0, 0])).tolist(), "image_size": [W, H]}


def _centres(image: np.ndarray) -> np.ndarray:
    """Intensity-weighted centres ``[N, 2]`` (x, y) of the bright blobs of an image."""
    grey = image[..., 0].astype(np.float64)
    count, labels = cv2.connectedComponents((grey > 60).astype(np.uint8))
    ys, xs = np.mgrid[0:grey.shape[0], 0:grey.shape[1]]
    centres = []
    for label in range(1, count):
        weight = np.where(labels == label, grey, 0.0)
        if weight.sum() > 500 and (labels == label).sum() < 200:  # whole spots, not merged ones
            centres.append(((weight * xs).sum() / weight.sum(), (weight * ys).sum() / weight.sum()))
    return np.array(centres)


def _row_differences(left: np.ndarray, right: np.ndarray) -> np.ndarray:
    """|y_left - y_right| of each left spot and its nearest right spot (spots are 40 px apart,
    the disparity about 10 px: the nearest is the match)."""
    a, b = _centres(left), _centres(right)
    nearest = np.linalg.norm(a[:, None] - b[None], axis=-1).argmin(1)
    return np.abs(a[:, 1] - b[nearest, 1])


def test_rectify_puts_matching_spots_on_one_row(tmp_path: Path, capsys: pytest.CaptureFixture
                                                ) -> None:
    rig = _unrectified_rig(tmp_path)
    (tmp_path / "rig.yaml").write_text(yaml.safe_dump(rig))
    before = _row_differences(io.read_image(tmp_path / "l.png"), io.read_image(tmp_path / "r.png"))
    assert before.max() > 3  # the un-rectified pair is far from row-aligned
    out = tmp_path / "out"
    code, stdout, err = run_cli(["rectify", str(tmp_path / "l.png"), str(tmp_path / "r.png"),
                                 "--calib", str(tmp_path / "rig.yaml"), "-o", str(out)], capsys)
    assert code == 0, err
    assert sorted(p.name for p in out.iterdir()) == ["calib.txt", "left.png", "right.png"]
    left, right = io.read_image(out / "left.png"), io.read_image(out / "right.png")
    after = _row_differences(left, right)
    print(f"row differences of {len(after)} spots: before max {before.max():.2f} px, after "
          f"mean {after.mean():.3f} max {after.max():.3f} px")
    assert len(after) >= 0.8 * len(SPOTS) and after.max() < 0.5
    calibration = read_stereo_calibration(out / "calib.txt")
    assert calibration.baseline == pytest.approx(BASELINE, rel=1e-6)
    assert calibration.doffs == 0 and calibration.image_size == (H, W)
    assert f"--calib {out / 'calib.txt'}" in stdout


def test_the_rectified_calibration_gives_depth(tmp_path: Path, capsys: pytest.CaptureFixture
                                               ) -> None:
    """The written calib.txt is what ``crossview stereo --calib`` reads."""
    rig = _unrectified_rig(tmp_path)
    (tmp_path / "rig.json").write_text(json.dumps(rig))
    out = tmp_path / "out"
    code, _, err = run_cli(["rectify", str(tmp_path / "l.png"), str(tmp_path / "r.png"),
                            "--calib", str(tmp_path / "rig.json"), "-o", str(out)], capsys)
    assert code == 0, err
    code, _, err = run_cli(["stereo", str(out / "left.png"), str(out / "right.png"), "--calib",
                            str(out / "calib.txt"), "--model", "matchstereo-mini", "--no-lri",
                            "--no-refine", "-o", str(tmp_path / "depth")], capsys)
    assert code == 0, err
    assert (tmp_path / "depth" / "left_depth.npy").is_file()


def test_stereo_points_an_unrectified_calibration_to_rectify(
        tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    (tmp_path / "rig.yaml").write_text(yaml.safe_dump(_unrectified_rig(tmp_path)))
    code, _, err = run_cli(["stereo", str(tmp_path / "l.png"), str(tmp_path / "r.png"),
                            "--calib", str(tmp_path / "rig.yaml"), "-o", str(tmp_path / "out")],
                           capsys)
    assert code == 2 and len(err.splitlines()) == 1, err
    assert "rectify the pair first with `crossview rectify LEFT RIGHT --calib FILE`" in err


def _bad(rig: dict[str, object], key: str, value: object) -> dict[str, object]:
    return {**rig, key: value}


BAD = {
    "K shape": (lambda rig: _bad(rig, "K1", [[1, 0], [0, 1]]), "K1 must be 3x3, got shape 2x2"),
    "not a rotation": (lambda rig: _bad(rig, "R", (2 * np.eye(3)).tolist()),
                       "R is not a rotation matrix"),
    "T shape": (lambda rig: _bad(rig, "T", [0.1, 0.0]), "T must be 3, got shape 2"),
    "distortion": (lambda rig: _bad(rig, "D2", [0.1, 0.2, 0.3]),
                   "D2 must hold 4, 5, 8, 12 or 14 distortion coefficients"),
    "size mismatch": (lambda rig: _bad(rig, "image_size", [W * 2, H * 2]),
                      f"the left image is {W}x{H} but"),
    "no size": (lambda rig: {k: v for k, v in rig.items() if k != "image_size"},
                "no image size"),
    "missing R": (lambda rig: {k: v for k, v in rig.items() if k != "R"},
                  "not a stereo rig calibration: no R"),
    "right camera on the left": (lambda rig: _bad(rig, "T", [BASELINE, 0.0, 0.0]),
                                 "the second camera is left of the first"),
}


@pytest.mark.parametrize("case", list(BAD))
def test_a_bad_calibration_is_one_line_exit_2_nothing_written(
        tmp_path: Path, capsys: pytest.CaptureFixture, case: str) -> None:
    make, message = BAD[case]
    (tmp_path / "rig.yaml").write_text(yaml.safe_dump(make(_unrectified_rig(tmp_path))))
    code, _, err = run_cli(["rectify", str(tmp_path / "l.png"), str(tmp_path / "r.png"),
                            "--calib", str(tmp_path / "rig.yaml"), "-o",
                            str(tmp_path / "out")], capsys)
    assert code == 2 and len(err.splitlines()) == 1 and message in err, err
    assert err.startswith("error: ") and not (tmp_path / "out").exists()


def test_opencv_and_kitti_files_read_as_the_same_rig(tmp_path: Path) -> None:
    """An OpenCV FileStorage YAML and a KITTI raw calib_cam_to_cam.txt (poses relative to
    camera 0) give the rig's K, R and T."""
    rig = _unrectified_rig(tmp_path)
    storage = cv2.FileStorage(str(tmp_path / "cv.yml"), cv2.FILE_STORAGE_WRITE)
    for key in ("K1", "D1", "K2", "D2", "R", "T"):
        storage.write(key, np.array(rig[key], np.float64))
    storage.write("image_size", np.array([W, H], np.float64))
    storage.release()
    zero_to_left = _rotation(0.1, 0.0, 0.05)  # camera 0 is a third camera of the rig
    left_t = np.array([0.06, 0.01, 0.0])
    right_r = np.array(rig["R"]) @ zero_to_left
    right_t = np.array(rig["R"]) @ left_t + np.array(rig["T"])

    def line(key: str, values: np.ndarray) -> str:
        return f"{key}: " + " ".join(f"{v:.12e}" for v in np.ravel(values))

    (tmp_path / "calib_cam_to_cam.txt").write_text("\n".join([
        "calib_time: 09-Jan-2012 13:57:47", line("S_02", [W, H]), line("K_02", K),
        line("D_02", np.zeros(5)), line("R_02", zero_to_left), line("T_02", left_t),
        line("S_03", [W, H]), line("K_03", K), line("D_03", np.zeros(5)),
        line("R_03", right_r), line("T_03", right_t)]) + "\n")
    for name in ("cv.yml", "calib_cam_to_cam.txt"):
        read = read_rig_calibration(tmp_path / name)
        np.testing.assert_allclose(read.K1, K, atol=1e-9)
        np.testing.assert_allclose(read.R, rig["R"], atol=1e-9)
        np.testing.assert_allclose(read.T, rig["T"], atol=1e-9)
        assert read.image_size == (H, W)
