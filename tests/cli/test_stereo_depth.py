"""``crossview stereo`` with a calibration (depth map, point cloud) and ``--save-confidence``
(stereo and flow): the files against the disparity written beside them, the PLY read back by
an independent parser, and every bad calibration input one line, exit code 2, nothing written."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import plyfile
import pytest
import torch
from PIL import Image

from cli_runner import run_cli
from crossview import api
from crossview.data import io
from crossview.models.matchstereo import MatchStereo
from crossview.models.matchstereo.bundle import write_bundle
from crossview.models.registry import ModelSpec, register_model
from small_networks import SMALL

register_model(ModelSpec("cli-depth-stereo", lambda: MatchStereo(SMALL), "stereo"), replace=True)
register_model(ModelSpec("cli-depth-flow", lambda: MatchStereo(SMALL, task="flow"), "flow"),
               replace=True)
H, W = 192, 200
CALIB = """cam0=[300.5 0 90.25; 0 300.5 101.5; 0 0 1]
cam1=[300.5 0 92.25; 0 300.5 101.5; 0 0 1]
doffs=2.0
baseline=120.0
width={w}
height={h}
"""


@pytest.fixture
def pair(tmp_path: Path) -> tuple[Path, Path]:
    # smooth texture shifted by 4 px, so the disparity is mostly smooth and positive
    rng = np.random.default_rng(0)
    coarse = rng.integers(0, 256, (H // 8 + 1, W // 8 + 2, 3), dtype=np.uint8)
    big = np.asarray(Image.fromarray(coarse).resize((W + 16, H + 8), Image.BILINEAR))
    folder = tmp_path / "in"
    folder.mkdir()
    paths = folder / "scene_l.png", folder / "scene_r.png"
    Image.fromarray(np.ascontiguousarray(big[:H, 8:W + 8])).save(paths[0])
    Image.fromarray(np.ascontiguousarray(big[:H, 12:W + 12])).save(paths[1])
    return paths


def _stereo(pair: tuple[Path, Path], out: Path, *args: str, fast: bool = False) -> list[str]:
    """The command; the bundled default model (a random one matches little) unless ``fast``."""
    model = ["--model", "cli-depth-stereo"] if fast else []
    return ["stereo", str(pair[0]), str(pair[1]), "-o", str(out), *model, "--format", "npy",
            *args]


def test_depth_and_point_cloud_match_the_disparity(tmp_path: Path, pair: tuple[Path, Path],
                                                   capsys: pytest.CaptureFixture[str]) -> None:
    f, b, doffs, cx, cy = 250.0, 0.3, 1.5, 97.0, 90.5
    out = tmp_path / "out"
    code, _, err = run_cli(_stereo(pair, out, "--focal", str(f), "--baseline", str(b), "--doffs",
                                str(doffs), "--cx", str(cx), "--cy", str(cy), "--edge-ratio",
                                "0"), capsys)
    assert code == 0, err
    disparity = io.read_npy(out / "scene_l_disp.npy").astype(np.float64)
    noc = np.asarray(Image.open(out / "scene_l_disp_noc.png")) == 255
    depth = io.read_npy(out / "scene_l_depth.npy")
    expected_keep = noc & (disparity + doffs > 0)
    assert expected_keep.mean() > 0.3  # the check below has pixels to check
    np.testing.assert_array_equal(np.isnan(depth), ~expected_keep)  # no depth: NaN, not 0
    np.testing.assert_allclose(depth[expected_keep],
                               f * b / (disparity[expected_keep] + doffs), rtol=1e-6)

    vertex = plyfile.PlyData.read(str(out / "scene_l_depth.ply"))["vertex"]
    points = np.stack([vertex[a] for a in "xyz"], 1).astype(np.float64)
    colours = np.stack([vertex[c] for c in ("red", "green", "blue")], 1)
    assert len(points) == expected_keep.sum()
    u = np.round(f * points[:, 0] / points[:, 2] + cx).astype(int)
    v = np.round(f * points[:, 1] / points[:, 2] + cy).astype(int)
    np.testing.assert_allclose(f * points[:, 0] / points[:, 2] + cx, u, atol=1e-3)
    assert expected_keep[v, u].all() and len(set(zip(u, v, strict=True))) == len(points)
    np.testing.assert_allclose(points[:, 2], depth[v, u], rtol=1e-6)
    np.testing.assert_array_equal(colours, io.read_image(pair[0])[v, u])


def test_calib_file_png16_in_millimetres_max_depth_and_edges(
        tmp_path: Path, pair: tuple[Path, Path], capsys: pytest.CaptureFixture[str]) -> None:
    calib = tmp_path / "calib.txt"
    calib.write_text(CALIB.format(w=W, h=H))
    out = tmp_path / "out"
    code, _, err = run_cli(_stereo(pair, out, "--calib", str(calib), "--depth-format", "png16",
                                "--max-depth", "9"), capsys)
    assert code == 0, err
    disparity = io.read_npy(out / "scene_l_disp.npy").astype(np.float64)
    noc = np.asarray(Image.open(out / "scene_l_disp_noc.png")) == 255
    millimetres = io.read_png16(out / "scene_l_depth.png")
    depth = 300.5 * 0.12 / (disparity + 2.0)
    kept = millimetres > 0
    assert kept.any() and not (kept & ~noc).any() and (depth[kept] <= 9).all()
    np.testing.assert_allclose(millimetres[kept], np.round(depth[kept] * 1000), atol=1)
    # what the filters removed: beyond 9 m, or a depth edge (a 5 % jump to a 4-neighbour)
    candidates = noc & (disparity + 2.0 > 0) & (depth <= 9)
    removed = candidates & ~kept
    padded = np.pad(depth, 1, mode="edge")
    jumps = np.stack([np.abs(depth - padded[1 + dy:1 + dy + H, 1 + dx:1 + dx + W])
                      > 0.05 * np.minimum(depth, padded[1 + dy:1 + dy + H, 1 + dx:1 + dx + W])
                      for dy, dx in ((-1, 0), (1, 0), (0, -1), (0, 1))]).any(0)
    np.testing.assert_array_equal(removed, candidates & jumps)
    vertex = plyfile.PlyData.read(str(out / "scene_l_depth.ply"))["vertex"]
    assert vertex.count == kept.sum()


def test_stereo_confidence_files_hold_the_api_confidence(
        tmp_path: Path, pair: tuple[Path, Path], capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "out"
    code, _, err = run_cli(_stereo(pair, out, "--save-confidence", "--save-right"), capsys)
    assert code == 0, err
    result = api.estimate_disparity(*(io.read_image(p) for p in pair))
    for view, expected in (("disp", result.confidence), ("disp_right", result.confidence_right)):
        values = io.read_npy(out / f"scene_l_{view}_confidence.npy")
        picture = np.asarray(Image.open(out / f"scene_l_{view}_confidence.png"))
        assert values.dtype == np.float32 and values.shape == (H, W)
        np.testing.assert_array_equal(values, expected[0].numpy())
        np.testing.assert_array_equal(picture, np.round(values * 255).astype(np.uint8))
    # the pair is a 4 px shift: where the match stays inside the right image the model is
    # consistent, in the 4 left columns (no match) it is not
    left = io.read_npy(out / "scene_l_disp_confidence.npy")
    assert np.median(left[:, 16:]) > 0.6 and np.median(left[:, :2]) < 0.2


@pytest.mark.parametrize("command", ["stereo", "flow"])
def test_min_confidence_takes_low_confidence_pixels_out(
        tmp_path: Path, pair: tuple[Path, Path], capsys: pytest.CaptureFixture[str],
        command: str) -> None:
    """``--min-confidence C`` (C: the median confidence of a first run's consistent pixels,
    same weights): no pixel of the _noc mask has a confidence below C, the mask is the first
    run's less those pixels, and depth keeps only its pixels (stereo)."""
    model = "cli-depth-stereo" if command == "stereo" else "cli-depth-flow"
    view = "disp" if command == "stereo" else "flow"
    calib = ["--focal", "300", "--baseline", "0.1", "--edge-ratio", "0"] * (command == "stereo")
    torch.manual_seed(0)  # one network for both runs
    weights, _ = write_bundle(MatchStereo(SMALL, task=command), tmp_path / "w.safetensors",
                              name=model, task=command)

    def run(threshold: str) -> tuple[np.ndarray, np.ndarray]:
        out = tmp_path / threshold
        code, _, err = run_cli([command, str(pair[0]), str(pair[1]), "-o", str(out), "--model",
                                model, "--weights", str(weights), "--save-confidence",
                                "--min-confidence", threshold, *calib], capsys)
        assert code == 0, err
        return (np.asarray(Image.open(out / f"scene_l_{view}_noc.png")) == 255,
                io.read_npy(out / f"scene_l_{view}_confidence.npy"))

    first, confidence = run("0")
    threshold = f"{np.median(confidence[first]):.4f}"
    mask, confidence = run(threshold)
    assert (confidence[mask] >= float(threshold)).all() and mask.any()
    taken = first & (confidence < float(threshold))
    assert taken.any()  # about half the consistent pixels
    np.testing.assert_array_equal(mask, first & ~taken)
    if command == "stereo":
        depth = io.read_npy(tmp_path / threshold / "scene_l_depth.npy")
        assert np.isnan(depth[~mask]).all()


def test_flow_confidence(tmp_path: Path, pair: tuple[Path, Path],
                         capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "out"
    code, _, err = run_cli(["flow", str(pair[0]), str(pair[1]), "-o", str(out), "--model",
                         "cli-depth-flow", "--save-confidence"], capsys)
    assert code == 0, err
    names = sorted(p.name for p in out.iterdir())
    assert "scene_l_flow_confidence.npy" in names and "scene_l_flow_confidence.png" in names
    assert not any("backward_confidence" in n for n in names)
    values = io.read_npy(out / "scene_l_flow_confidence.npy")
    assert values.shape == (H, W) and (values >= 0).all() and (values <= 1).all()


def test_a_coloured_depth_picture_with_a_colour_bar(
        tmp_path: Path, pair: tuple[Path, Path], capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "out"
    code, _, err = run_cli(_stereo(pair, out, "--focal", "300", "--baseline", "0.1",
                                fast=True), capsys)
    assert code == 0, err
    depth = io.read_npy(out / "scene_l_depth.npy")
    picture = io.read_image(out / "scene_l_depth_color.png")
    assert picture.shape[0] == H and picture.shape[1] > W  # the colour bar on the right
    shown = picture[:, :W]
    kept = ~np.isnan(depth)
    assert (shown[~kept] == 0).all() and (shown[kept].max(-1) > 0).all()
    near, far = (np.unravel_index(pick(depth), depth.shape) for pick in (np.nanargmin,
                                                                         np.nanargmax))
    assert shown[near][0] > shown[near][2] and shown[far][2] > shown[far][0]  # red near, blue far


def test_a_calibration_of_twice_the_size_is_rescaled(
        tmp_path: Path, pair: tuple[Path, Path], capsys: pytest.CaptureFixture[str]) -> None:
    """A calib.txt for 2W x 2H on W x H images (as samples/README.md scales the Motorcycle
    calibration): depth uses the halved focal length and doffs, with a note saying so."""
    calib = tmp_path / "calib.txt"
    calib.write_text(CALIB.format(w=2 * W, h=2 * H))
    out = tmp_path / "out"
    code, _, err = run_cli(_stereo(pair, out, "--calib", str(calib), "--edge-ratio", "0",
                                fast=True), capsys)
    assert code == 0, err
    assert (f"note: {calib} is for {2 * W}x{2 * H} px images; rescaled to the {W}x{H} images "
            "(focal 150.25 px, doffs 1 px: focal, cx and doffs scale with the width, cy with "
            "the height)") in err.splitlines()
    disparity = io.read_npy(out / "scene_l_disp.npy").astype(np.float64)
    depth = io.read_npy(out / "scene_l_depth.npy")
    kept = ~np.isnan(depth)
    assert kept.any()
    np.testing.assert_allclose(depth[kept], 150.25 * 0.12 / (disparity[kept] + 1.0), rtol=1e-6)


def _bad_cases(tmp_path: Path) -> dict[str, tuple[list[str], str]]:
    good = tmp_path / "calib.txt"
    good.write_text(CALIB.format(w=W, h=H))
    other_size = tmp_path / "calib_wide.txt"
    other_size.write_text(CALIB.format(w=2 * W, h=H))
    fractional = tmp_path / "calib_fraction.txt"
    fractional.write_text(CALIB.format(w=W + 0.5, h=H))
    malformed = tmp_path / "bad.txt"
    malformed.write_text(CALIB.format(w=W, h=H).replace("0 0 1]\ncam1", "0 1]\ncam1"))
    ndisp_only = tmp_path / "ndisp.txt"
    ndisp_only.write_text("ndisp=64\n")
    image = tmp_path / "image.png"
    Image.new("RGB", (4, 4)).save(image)
    return {
        "malformed calib": (["--calib", str(malformed)], "cam0 must hold 9 finite numbers"),
        "calib of another kind": (["--calib", str(ndisp_only)], "not a stereo calibration file"),
        "image as calib": (["--calib", str(image)], "image.png: not a text file"),
        "missing calib": (["--calib", str(tmp_path / "nope.txt")], "nope.txt: no such file"),
        "calib for another size": (["--calib", str(other_size)],
                                   "is for 400x192 px images but the images are 200x192 (W x "
                                   "H), not a scaled copy"),
        "calib of a fractional width": (["--calib", str(fractional)],
                                        "calib_fraction.txt: width and height must be whole "
                                        "positive numbers of pixels, got 200.5 and 192"),
        "zero focal": (["--focal", "0", "--baseline", "0.1"], "focal must be a positive"),
        "negative focal": (["--focal", "-5", "--baseline", "0.1"], "focal must be a positive"),
        "zero baseline": (["--focal", "500", "--baseline", "0"], "baseline must be a positive"),
        "negative baseline": (["--focal", "500", "--baseline", "-0.1"],
                              "baseline must be a positive"),
        "calib and focal": (["--calib", str(good), "--focal", "500"],
                            "either as --calib or as --focal/--baseline, not both"),
        "focal without baseline": (["--focal", "500"], "--baseline missing"),
        "doffs alone": (["--doffs", "3"], "--focal and --baseline missing"),
        "depth format without calibration": (["--depth-format", "png16"],
                                             "--depth-format needs a calibration"),
        "max depth without calibration": (["--max-depth", "10"],
                                          "--max-depth needs a calibration"),
        "unknown depth format": (["--calib", str(good), "--depth-format", "exr"],
                                 "--depth-format 'exr' is not one of npy, pfm, png16"),
        "negative max depth": (["--calib", str(good), "--max-depth", "-1"],
                               "--max-depth must be positive"),
        "min confidence above 1": (["--min-confidence", "1.5"],
                                   "--min-confidence must be in [0, 1] (a confidence), got 1.5"),
        "negative edge ratio": (["--calib", str(good), "--edge-ratio", "-0.1"],
                                "--edge-ratio must be 0 (off) or positive"),
    }


@pytest.mark.parametrize("case", ["malformed calib", "calib of another kind", "image as calib",
                                  "missing calib", "calib for another size",
                                  "calib of a fractional width", "zero focal",
                                  "negative focal", "zero baseline", "negative baseline",
                                  "calib and focal", "focal without baseline", "doffs alone",
                                  "depth format without calibration",
                                  "max depth without calibration", "unknown depth format",
                                  "negative max depth", "negative edge ratio",
                                  "min confidence above 1"])
def test_bad_calibration_input_is_one_line_exit_2_no_output(
        tmp_path: Path, pair: tuple[Path, Path], capsys: pytest.CaptureFixture[str],
        case: str) -> None:
    args, message = _bad_cases(tmp_path)[case]
    out = tmp_path / "out"
    code, _, err = run_cli(_stereo(pair, out, *args, fast=True), capsys)
    assert code == 2
    lines = err.splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: ") and message in lines[0], err
    assert not out.exists()


def test_a_calib_file_with_a_byte_order_mark_gives_depth(
        tmp_path: Path, pair: tuple[Path, Path], capsys: pytest.CaptureFixture[str]) -> None:
    calib = tmp_path / "calib.txt"
    calib.write_text("\ufeff" + CALIB.format(w=W, h=H), encoding="utf-8")
    out = tmp_path / "out"
    code, _, err = run_cli(_stereo(pair, out, "--calib", str(calib), fast=True), capsys)
    assert code == 0, err
    assert (out / "scene_l_depth.npy").is_file() and (out / "scene_l_depth.ply").is_file()


def _non_finite_cases(tmp_path: Path) -> dict[str, tuple[list[str], str]]:
    huge_focal = tmp_path / "calib.txt"
    huge_focal.write_text(CALIB.format(w=W, h=H).replace("300.5 0", "1e300 0"))
    return {
        "focal and baseline": (["--focal", "1e30", "--baseline", "1e30"],
                               "--focal 1e+30 and --baseline 1e+30 give depths beyond the "
                               "float32 range"),
        "calib focal": (["--calib", str(huge_focal)],
                        f"{huge_focal} (focal 1e+300, baseline 0.12, doffs 2) give depths "
                        "beyond the float32 range"),
        "cx": (["--focal", "250", "--baseline", "0.3", "--cx", "1e300"],
               "--cx 1e+300 and --baseline 0.3 put points beyond the float32 range"),
    }


@pytest.mark.parametrize("case", ["focal and baseline", "calib focal", "cx"])
def test_a_calibration_that_makes_depth_or_points_non_finite_fails_and_writes_nothing(
        tmp_path: Path, pair: tuple[Path, Path], capsys: pytest.CaptureFixture[str],
        recwarn: pytest.WarningsRecorder, case: str) -> None:
    """Every kept depth or point would be written as infinity (or overflow float32 on the way,
    with numpy warnings): the pair fails instead, naming the calibration's numbers."""
    args, message = _non_finite_cases(tmp_path)[case]
    out = tmp_path / "out"
    # the bundled model: a random one may keep no pixel at all
    code, stdout, err = run_cli(_stereo(pair, out, *args, "--edge-ratio", "0"), capsys)
    lines = err.splitlines()
    assert code == 2 and stdout == "" and len(lines) == 1, err
    assert lines[0].startswith(f"error: {pair[0]} and {pair[1]}: {message} ("), err
    assert lines[0].endswith(" values) (no output written)"), err
    assert not [w for w in recwarn if issubclass(w.category, RuntimeWarning)]
    assert not out.exists()


def test_pfm_depth_holds_metres(tmp_path: Path, pair: tuple[Path, Path],
                                capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "out"
    # the bundled model: which pixels a random network keeps depends on its draw
    code, _, err = run_cli(_stereo(pair, out, "--focal", "400", "--baseline", "0.25",
                                   "--depth-format", "pfm", "--edge-ratio", "0"), capsys)
    assert code == 0, err
    disparity = io.read_npy(out / "scene_l_disp.npy").astype(np.float64)
    depth = io.read_pfm(out / "scene_l_depth.pfm")
    kept = ~np.isnan(depth)
    assert kept.any()
    np.testing.assert_allclose(depth[kept], 100.0 / disparity[kept], rtol=1e-6)


@pytest.mark.parametrize("fmt", ["npy", "pfm", "png16"])
def test_a_pixel_without_depth_is_nan_in_float_files_and_0_in_a_png(
        tmp_path: Path, pair: tuple[Path, Path], fmt: str,
        capsys: pytest.CaptureFixture[str]) -> None:
    """Dropped pixels (inconsistent, no finite depth, beyond --max-depth) have no depth: NaN
    in the float files (0 would read as a depth), 0 in the 16-bit PNG, which cannot hold NaN
    (millimetres); the point cloud has the others only."""
    out = tmp_path / "out"
    code, _, err = run_cli(_stereo(pair, out, "--focal", "300", "--baseline", "0.1",
                                   "--max-depth", "20", "--edge-ratio", "0",
                                   "--depth-format", fmt), capsys)  # a random model keeps few
    assert code == 0, err
    disparity = io.read_npy(out / "scene_l_disp.npy").astype(np.float64)
    noc = np.asarray(Image.open(out / "scene_l_disp_noc.png")) == 255
    positive = disparity > 0
    keep = noc & positive & (30.0 / np.where(positive, disparity, 1.0) <= 20)
    assert keep.any() and not keep.all()
    if fmt == "png16":
        millimetres = io.read_png16(out / "scene_l_depth.png")
        np.testing.assert_array_equal(millimetres == 0, ~keep)
    else:
        depth = io.read_npy(out / "scene_l_depth.npy") if fmt == "npy" else io.read_pfm(
            out / "scene_l_depth.pfm")
        np.testing.assert_array_equal(np.isnan(depth), ~keep)
        np.testing.assert_allclose(depth[keep], 30.0 / disparity[keep], rtol=1e-6)
    assert plyfile.PlyData.read(str(out / "scene_l_depth.ply"))["vertex"].count == keep.sum()


def test_a_baseline_in_millimetres_gets_one_warning_naming_the_fix(
        tmp_path: Path, pair: tuple[Path, Path], capsys: pytest.CaptureFixture[str]) -> None:
    """Middlebury's calib.txt writes the baseline in millimetres; given as --baseline it puts
    the scene kilometres away: the depth is still written (a far scene exists), with one
    warning per run (here two pairs) saying the unit and the fix; metres give no warning."""
    for side in "lr":
        (pair[0].parent / f"scene2_{side}.png").write_bytes(
            pair["lr".index(side)].read_bytes())
    patterns = [str(pair[0].parent / "*_l.png"), str(pair[0].parent / "*_r.png")]
    args = ["stereo", *patterns, "--focal", "496.818", "--format", "npy"]
    code, out, err = run_cli([*args, "-o", str(tmp_path / "mm"), "--baseline", "193.001"],
                             capsys)
    assert code == 0 and "wrote 2 pair(s)" in out, err
    depth = io.read_npy(tmp_path / "mm" / "scene_l_depth.npy")
    assert np.median(depth[depth > 0]) > 1000  # what the user asked for, in metres
    lines = [line for line in err.splitlines() if not line.startswith("pair ")]
    assert len(lines) == 1 and lines[0].startswith("warning: median depth "), err
    assert " km (depth is in metres): --baseline 193.001 is read as metres; if it is in " \
           "millimetres (as Middlebury's calib.txt writes it), pass --baseline 0.193001" \
           in lines[0], err
    code, _, err = run_cli([*args, "-o", str(tmp_path / "m"), "--baseline", "0.193001"], capsys)
    assert code == 0 and [line for line in err.splitlines() if not line.startswith("pair ")] == []
