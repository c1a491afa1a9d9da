"""Rectification without a calibration (``crossview.geometry.uncalibrated_rectification``,
``crossview rectify`` without ``--calib``): a rectified pair of two textured planes whose right
camera is turned by a known rotation is rectified back from its own matches, so that the known
correspondences lie on one row again with positive disparities; the fit recovers exact
synthetic cameras; an already rectified pair stays nearly as it is; bad pairs are one error
line, exit code 2, nothing written."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from cli_runner import run_cli
from crossview.data import io
from crossview.errors import UserError
from crossview.geometry.uncalibrated_rectification import (
    camera_matrix,
    rectify_uncalibrated,
    rectifying_cameras,
    rotation,
    sampson_distances,
)

cv2 = pytest.importorskip("cv2")

H, W = 360, 480
BACK, FRONT = 6.0, 22.0  # the planes' disparities (px)
FRONT_BOX = (150, 330, 100, 260)  # x0, x1, y0, y1 of the nearer plane in the left image
TURN = np.radians([0.8, 1.5, 1.2])  # the right camera's turn about x, y, z
LARGE_TURN = np.radians([2.0, 4.0, 12.0])  # a photograph held askew


def _texture(seed: int) -> np.ndarray:
    """A smooth random texture ``[H, W + 64, 3]`` uint8 with features at several scales."""
    rng = np.random.default_rng(seed)
    image = np.zeros((H, W + 64))
    for scale in (3, 7, 15):
        noise = rng.normal(size=(H // scale + 2, (W + 64) // scale + 2))
        image += cv2.resize(noise, (W + 64 + 2 * scale, H + 2 * scale),
                            interpolation=cv2.INTER_CUBIC)[scale:H + scale, scale:W + 64 + scale]
    image = (image - image.min()) / np.ptp(image) * 255
    return np.repeat(image.astype(np.uint8)[..., None], 3, 2)


def _pair() -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The rectified pair ``left, right [H, W, 3]`` and the left view's disparity ``[H, W]``."""
    back, front = _texture(0), _texture(1)
    x0, x1, y0, y1 = FRONT_BOX
    disparity = np.full((H, W), BACK)
    disparity[y0:y1, x0:x1] = FRONT
    left, right = back[:, 32:32 + W].copy(), back[:, 32 + int(BACK):32 + int(BACK) + W].copy()
    left[y0:y1, x0:x1] = front[y0:y1, x0:x1]
    right[y0:y1, x0 - int(FRONT):x1 - int(FRONT)] = front[y0:y1, x0:x1]
    return left, right, disparity


def _turn(angles: np.ndarray = TURN) -> np.ndarray:
    """The right camera's turn by ``angles`` as a homography ``[3, 3]`` (rectified -> turned
    pixel)."""
    k = camera_matrix(float(W), H, W)
    return k @ rotation(angles) @ np.linalg.inv(k)


def _carried(points: np.ndarray, homography: np.ndarray) -> np.ndarray:
    mapped = np.column_stack([points, np.ones(len(points))]) @ homography.T
    return mapped[:, :2] / mapped[:, 2:]


def _correspondences(disparity: np.ndarray, margin: int = 40) -> tuple[np.ndarray, np.ndarray]:
    """Left pixels ``[N, 2]`` on a grid inside both planes and their rectified right pixels."""
    ys, xs = np.mgrid[margin:H - margin:10, margin:W - margin:10]
    left = np.column_stack([xs.ravel(), ys.ravel()]).astype(np.float64)
    right = left - np.column_stack([disparity[ys.ravel(), xs.ravel()], np.zeros(len(left))])
    return left, right


@pytest.mark.parametrize("angles", [TURN, LARGE_TURN], ids=["small-turn", "large-turn"])
def test_a_turned_right_camera_is_rectified_back(angles: np.ndarray) -> None:
    left, right, disparity = _pair()
    turned = cv2.warpPerspective(right, _turn(angles), (W, H), flags=cv2.INTER_LINEAR,
                                 borderMode=cv2.BORDER_REPLICATE)
    points0, points1 = _correspondences(disparity)
    points1 = _carried(points1, _turn(angles))  # where the turned camera sees them
    before = np.abs(points0[:, 1] - points1[:, 1])
    assert np.median(before) > 3  # the turned pair is far from row-aligned

    pair = rectify_uncalibrated(left, turned)
    rectified0 = _carried(points0, pair.left_homography)
    rectified1 = _carried(points1, pair.right_homography)
    rows = np.abs(rectified0[:, 1] - rectified1[:, 1])
    assert np.median(rows) < 0.15 and np.percentile(rows, 95) < 0.5
    assert pair.row_error < 0.3 and pair.matches >= 100
    found = rectified0[:, 0] - rectified1[:, 0]
    assert found.min() > 0  # disparities positive after the shift
    # the two planes stay apart by their disparities' difference (the focal is near W)
    front = disparity[points0[:, 1].astype(int), points0[:, 0].astype(int)] == FRONT
    gap = np.median(found[front]) - np.median(found[~front])
    assert gap == pytest.approx(FRONT - BACK, rel=0.15)
    assert pair.disparity_range[0] >= 0 and pair.left.shape == left.shape
    # the rectified images hold the planes on one row: the front box's texture lines up
    x0, x1, y0, y1 = FRONT_BOX
    grey0, grey1 = (cv2.cvtColor(image, cv2.COLOR_RGB2GRAY).astype(np.float64)
                    for image in (pair.left, pair.right))
    centre = _carried(np.array([[(x0 + x1) / 2, (y0 + y1) / 2]]), pair.left_homography)[0]
    cx, cy = np.round(centre).astype(int)
    patch = grey0[cy - 30:cy + 30, cx - 30:cx + 30]
    shift = round(float(np.median(found[front])))
    scores = {dy: np.corrcoef(patch.ravel(), grey1[cy - 30 + dy:cy + 30 + dy,
                                                   cx - 30 - shift:cx + 30 - shift].ravel())[0, 1]
              for dy in range(-3, 4)}
    assert max(scores, key=scores.get) == 0 and scores[0] > 0.9


def test_the_fit_recovers_exact_cameras() -> None:
    """Points seen by two cameras turned by known rotations (focal 500): the fitted rotations
    rectify them to a fraction of a pixel (the pull towards parallel cameras costs a little
    of exact data), and the fitted focal is near 500."""
    rng = np.random.default_rng(3)
    k = camera_matrix(500.0, H, W)
    world = np.column_stack([rng.uniform(-2, 2, 400), rng.uniform(-1.5, 1.5, 400),
                             rng.uniform(3, 12, 400)])
    left_turn, right_turn = rotation(np.radians([0.0, -1.0, 2.0])), rotation(TURN)
    seen0 = (k @ left_turn.T @ world.T).T
    seen1 = (k @ right_turn.T @ (world - [0.3, 0.0, 0.0]).T).T
    points0, points1 = seen0[:, :2] / seen0[:, 2:], seen1[:, :2] / seen1[:, 2:]
    fitted, r0, r1 = rectifying_cameras(points0, points1, H, W)
    inverse = np.linalg.inv(fitted)
    rows0 = _carried(points0, fitted @ r0 @ inverse)[:, 1]
    rows1 = _carried(points1, fitted @ r1 @ inverse)[:, 1]
    rows = np.abs(rows0 - rows1)
    assert np.median(rows) < 0.1 and np.percentile(rows, 95) < 0.3 and rows.max() < 0.6
    before = np.abs(points0[:, 1] - points1[:, 1])
    assert np.median(before) > 5
    assert fitted[0, 0] == pytest.approx(500.0, rel=0.15)
    exact = np.linalg.inv(k).T @ right_turn.T @ np.array(
        [[0, 0, 0], [0, 0, -1], [0, 1, 0]]) @ left_turn @ np.linalg.inv(k)
    assert np.abs(sampson_distances(exact, points0, points1)).max() < 1e-9


def test_a_rectified_pair_is_kept_as_it_is() -> None:
    """Matches already on their rows: no resampling (it would only blur the pair)."""
    left, right, _ = _pair()
    pair = rectify_uncalibrated(left, right)
    assert pair.focal is None and pair.disparity_shift == 0
    assert np.array_equal(pair.left_homography, np.eye(3))
    assert np.array_equal(pair.right_homography, np.eye(3))
    assert np.array_equal(pair.left, left) and np.array_equal(pair.right, right)
    assert pair.row_error < 0.2
    assert pair.disparity_range[0] == pytest.approx(BACK, abs=0.5)
    assert pair.disparity_range[1] == pytest.approx(FRONT, abs=0.5)
    # half a pixel more of row offset than KEEP_ROWS_PX allows: rectified
    shifted = cv2.warpAffine(right, np.array([[1.0, 0, 0], [0, 1, 1.0]]), (W, H),
                             flags=cv2.INTER_CUBIC, borderMode=cv2.BORDER_REPLICATE)
    moved = rectify_uncalibrated(left, shifted)
    assert moved.focal is not None and moved.row_error < 0.2


def test_bad_pairs_are_named() -> None:
    left, right, _ = _pair()
    with pytest.raises(UserError, match="differ in size"):
        rectify_uncalibrated(left, right[:-10])
    flat = np.full((H, W, 3), 128, np.uint8)
    with pytest.raises(UserError, match="0 consistent feature matches"):
        rectify_uncalibrated(flat, flat)


def test_the_command_writes_the_pair_and_its_homographies(
        tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    left, right, _ = _pair()
    io.write_image(tmp_path / "l.png", left)
    io.write_image(tmp_path / "r.png", cv2.warpPerspective(right, _turn(), (W, H)))
    out = tmp_path / "out"
    code, stdout, err = run_cli(["rectify", str(tmp_path / "l.png"), str(tmp_path / "r.png"),
                                 "-o", str(out)], capsys)
    assert code == 0, err
    assert sorted(p.name for p in out.iterdir()) == ["left.png", "rectification.json",
                                                     "right.png"]
    record = json.loads((out / "rectification.json").read_text())
    assert np.asarray(record["left_homography"]).shape == (3, 3)
    assert record["row_error_px"] < 0.3 and record["matches"] >= 100
    assert io.read_image(out / "left.png").shape == (H, W, 3)
    assert f"crossview stereo {out / 'left.png'} {out / 'right.png'}" in stdout


@pytest.mark.parametrize(("right", "extra", "message"), [
    ("flat", [], "0 consistent feature matches"),
    ("small", [], "differ in size"),
    ("pair", ["--alpha", "1"], "--alpha needs --calib"),
])
def test_bad_uncalibrated_input_is_one_line_exit_2_nothing_written(
        tmp_path: Path, capsys: pytest.CaptureFixture, right: str, extra: list[str],
        message: str) -> None:
    left, pair_right, _ = _pair()
    io.write_image(tmp_path / "l.png", left)
    io.write_image(tmp_path / "r.png", {"flat": np.full_like(left, 128), "small": left[:-8],
                                        "pair": pair_right}[right])
    code, _, err = run_cli(["rectify", str(tmp_path / "l.png"), str(tmp_path / "r.png"), "-o",
                            str(tmp_path / "out"), *extra], capsys)
    assert code == 2 and len(err.splitlines()) == 1 and message in err, err
    assert err.startswith("error: ") and not (tmp_path / "out").exists()


def test_stereo_rectify_matches_two_photographs_in_one_command(
        tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    """``crossview stereo --rectify`` on a turned pair: the rectified pair is written beside
    the disparity, and the disparity (of the rectified left image) holds the two planes'
    disparities apart by their difference."""
    left, right, _ = _pair()
    io.write_image(tmp_path / "l.png", left)
    io.write_image(tmp_path / "r.png", cv2.warpPerspective(right, _turn(), (W, H),
                                                           borderMode=cv2.BORDER_REPLICATE))
    out = tmp_path / "out"
    code, stdout, err = run_cli(["stereo", str(tmp_path / "l.png"), str(tmp_path / "r.png"),
                                 "-o", str(out), "--rectify", "--format", "npy"], capsys)
    assert code == 0, err
    assert sorted(p.name for p in (out / "l_rectified").iterdir()) == [
        "left.png", "rectification.json", "right.png"]
    assert f"in {out / 'l_rectified'}" in stdout
    disparity = np.load(out / "l_disp.npy")
    homography = np.asarray(json.loads(
        (out / "l_rectified" / "rectification.json").read_text())["left_homography"])
    x0, x1, y0, y1 = FRONT_BOX

    def around(x: float, y: float) -> float:
        cx, cy = np.round(_carried(np.array([[x, y]]), homography)[0]).astype(int)
        return float(np.median(disparity[cy - 10:cy + 10, cx - 10:cx + 10]))

    back = np.median([around(x, y) for x, y in ((60, 60), (420, 60), (420, 300), (60, 300))])
    assert around((x0 + x1) / 2, (y0 + y1) / 2) - back == pytest.approx(FRONT - BACK, abs=1.5)


@pytest.mark.parametrize(("args", "message"), [
    (["--focal", "500", "--baseline", "0.1"], "gives no metric depth"),
    (["--model", "no-such-model"], "unknown model"),
])
def test_stereo_rectify_refuses_or_fails_whole(tmp_path: Path, capsys: pytest.CaptureFixture,
                                               args: list[str], message: str) -> None:
    """A contradiction, or a failure after the rectification (here the model's name): one
    error line, exit code 2, and the rectified pair removed again (nothing written)."""
    left, right, _ = _pair()
    io.write_image(tmp_path / "l.png", left)
    io.write_image(tmp_path / "r.png", right)
    code, _, err = run_cli(["stereo", str(tmp_path / "l.png"), str(tmp_path / "r.png"), "-o",
                            str(tmp_path / "out"), "--rectify", *args], capsys)
    assert code == 2 and len(err.splitlines()) == 1 and message in err, err
    assert not (tmp_path / "out").exists()
