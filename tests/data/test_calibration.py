"""``crossview.data.calibration``: Middlebury/ETH3D and KITTI calibration files, read against
hand-computed values, and every malformed or foreign file refused with its name."""

from __future__ import annotations

from pathlib import Path

import pytest

from crossview.data.calibration import StereoCalibration, read_stereo_calibration
from crossview.errors import UserError

SAMPLES = Path(__file__).resolve().parents[2] / "samples"

MIDDLEBURY = """cam0=[3979.911 0 1244.772; 0 3979.911 1019.507; 0 0 1]
cam1=[3979.911 0 1369.115; 0 3979.911 1019.507; 0 0 1]
doffs=124.343
baseline=193.001
width=2964
height=1988
ndisp=270
"""

# the layout of KITTI's calib_cam_to_cam.txt (values of the 2011_09_26 drive, rounded)
KITTI = """calib_time: 09-Jan-2012 13:57:47
corner_dist: 9.950000e-02
S_rect_00: 1.242000e+03 3.750000e+02
P_rect_00: 7.215377e+02 0.000000e+00 6.095593e+02 0.000000e+00 0.000000e+00 7.215377e+02 1.728540e+02 0.000000e+00 0.000000e+00 0.000000e+00 1.000000e+00 0.000000e+00
S_rect_02: 1.242000e+03 3.750000e+02
P_rect_02: 7.215377e+02 0.000000e+00 6.095593e+02 4.485728e+01 0.000000e+00 7.215377e+02 1.728540e+02 2.163791e-01 0.000000e+00 0.000000e+00 1.000000e+00 2.745884e-03
S_rect_03: 1.242000e+03 3.750000e+02
P_rect_03: 7.215377e+02 0.000000e+00 6.095593e+02 -3.395242e+02 0.000000e+00 7.215377e+02 1.728540e+02 2.199936e+00 0.000000e+00 0.000000e+00 1.000000e+00 2.729905e-03
"""  # noqa: E501


def _write(tmp_path: Path, text: str | bytes, name: str = "calib.txt") -> Path:
    path = tmp_path / name
    (path.write_bytes if isinstance(text, bytes) else path.write_text)(text)
    return path


def test_middlebury_calib(tmp_path: Path) -> None:
    cal = read_stereo_calibration(_write(tmp_path, MIDDLEBURY))
    assert cal == StereoCalibration(3979.911, 0.193001, 124.343, 1244.772, 1019.507, (1988, 2964))


def test_middlebury_doffs_from_the_principal_points_when_missing(tmp_path: Path) -> None:
    text = "\n".join(line for line in MIDDLEBURY.splitlines() if not line.startswith("doffs"))
    cal = read_stereo_calibration(_write(tmp_path, text))
    assert cal.doffs == pytest.approx(1369.115 - 1244.772)


def test_kitti_cam_to_cam(tmp_path: Path) -> None:
    cal = read_stereo_calibration(_write(tmp_path, KITTI, "calib_cam_to_cam.txt"))
    # baseline = tx_02 - tx_03 with tx = P[0, 3] / P[0, 0]
    assert cal.baseline == pytest.approx((44.85728 + 339.5242) / 721.5377)
    assert (cal.focal, cal.doffs, cal.cx, cal.cy) == (721.5377, 0.0, 609.5593, 172.854)
    assert cal.image_size == (375, 1242)
    assert 0.53 < cal.baseline < 0.54  # KITTI's colour cameras are 0.54 m apart


@pytest.mark.parametrize("text,name", [(MIDDLEBURY, "calib.txt"),
                                       (KITTI, "calib_cam_to_cam.txt")],
                         ids=["middlebury", "kitti"])
def test_a_utf8_byte_order_mark_is_read_past(tmp_path: Path, text: str, name: str) -> None:
    """Windows editors start UTF-8 files with U+FEFF; the first key must still be found."""
    plain = read_stereo_calibration(_write(tmp_path, text, name))
    marked = read_stereo_calibration(_write(tmp_path, "\ufeff" + text, name))
    assert marked == plain


def test_the_bundled_sample_calibration() -> None:
    cal = read_stereo_calibration(SAMPLES / "motorcycle_calib.txt")
    assert cal.image_size == (250, 370) and cal.baseline == pytest.approx(0.193001)
    assert cal.focal == pytest.approx(994.978 * 370 / 741, abs=1e-3)


def test_principal_point_defaults_to_the_image_centre() -> None:
    assert StereoCalibration(500.0, 0.1).principal_point(11, 21) == (10.0, 5.0)
    assert StereoCalibration(500.0, 0.1, cx=3.0, cy=4.0).principal_point(11, 21) == (3.0, 4.0)


@pytest.mark.parametrize("text,message", [
    ("ndisp=64\n", "not a stereo calibration file"),
    ("hello world\n", "not a stereo calibration file"),
    ("", "not a stereo calibration file"),
    (b"\x89PNG\r\n\x1a\n\xff\xfe", "not a text file"),
    (MIDDLEBURY.replace("cam0=[3979.911 0 1244.772; 0 3979.911 1019.507; 0 0 1]", "cam0=3979"),
     "cam0 must look like [f 0 cx; 0 f cy; 0 0 1]"),
    (MIDDLEBURY.replace("0 0 1]\ncam1", "0 1]\ncam1"), "cam0 must hold 9 finite numbers"),
    (MIDDLEBURY.replace("3979.911 0 1244.772", "abc 0 1244.772"), "cam0 must hold 9 numbers"),
    (MIDDLEBURY.replace("baseline=193.001", "baseline=-193.001"), "baseline must be a positive"),
    (MIDDLEBURY.replace("baseline=193.001", "baseline=0"), "baseline must be a positive"),
    (MIDDLEBURY.replace("baseline=193.001\n", ""), "no baseline entry"),
    (MIDDLEBURY.replace("cam0=[3979.911", "cam0=[-3979.911"), "focal must be a positive"),
    (MIDDLEBURY.replace("baseline=193.001", "baseline=nan"), "baseline must hold 1 finite"),
    (KITTI.replace("P_rect_03", "P_rect_13"), "no P_rect_03 entry"),
    (KITTI.replace("-3.395242e+02", "4.485728e+01"), "baseline must be a positive"),
    (KITTI.replace("1.000000e+00 2.745884e-03", "1.000000e+00"), "P_rect_02 must hold 12"),
    (KITTI.replace("S_rect_02: 1.242000e+03 3.750000e+02", "S_rect_02: 1242"),
     "S_rect_02 must hold 2"),
    (MIDDLEBURY.replace("width=2964", "width=2964.5"),
     "width and height must be whole positive numbers of pixels, got 2964.5 and 1988"),
    (MIDDLEBURY.replace("height=1988", "height=0"),
     "width and height must be whole positive numbers of pixels, got 2964 and 0"),
    (KITTI.replace("S_rect_02: 1.242000e+03", "S_rect_02: 1.2425e+03"),
     "S_rect_02 must be whole positive numbers of pixels, got 1242.5 and 375"),
], ids=["middlebury ndisp only", "prose", "empty", "binary", "cam0 not a matrix",
        "cam0 eight numbers", "cam0 word", "negative baseline", "zero baseline", "no baseline",
        "negative focal", "nan baseline", "kitti no P_rect_03", "kitti cameras swapped",
        "kitti short P_rect_02", "kitti short S_rect_02", "fractional width", "zero height",
        "kitti fractional width"])
def test_malformed_or_foreign_files_are_named(tmp_path: Path, text: str | bytes,
                                              message: str) -> None:
    path = _write(tmp_path, text)
    with pytest.raises(UserError) as caught:
        read_stereo_calibration(path)
    assert str(path) in str(caught.value) and message in str(caught.value), caught.value


def test_a_missing_file_is_named(tmp_path: Path) -> None:
    with pytest.raises(UserError, match=r"nope\.txt: no such file"):
        read_stereo_calibration(tmp_path / "nope.txt")


def test_a_calibration_rescales_to_a_scaled_copy_only() -> None:
    cal = StereoCalibration(500.0, 0.1, 3.0, 184.5, 124.5, image_size=(250, 370))
    assert cal.for_size(250, 370, "calib.txt") is cal
    double = cal.for_size(500, 740, "calib.txt")
    assert (double.focal, double.baseline, double.doffs) == (1000.0, 0.1, 6.0)
    assert (double.cx, double.cy, double.image_size) == (369.5, 249.5, (500, 740))
    with pytest.raises(UserError, match=r"calib.txt is for 370x250 px images but the images "
                                        r"are 740x250 \(W x H\), not a scaled copy"):
        cal.for_size(250, 740, "calib.txt")
