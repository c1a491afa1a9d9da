"""``crossview stereo`` on videos and folders of frames: two videos, a side-by-side video, two
frame folders, the frame range, the disparity / depth video, the warm start, the rows' offset
measured once a video, a failing frame, Ctrl-C, and bad input (one line, exit 2, nothing
written)."""

from __future__ import annotations

import signal
from pathlib import Path

import numpy as np
import pytest
import torch
from PIL import Image

from crossview import api
from crossview.cli.app import main
from crossview.data import disparity_video, io, video
from crossview.models.dense import inference
from crossview.models.matchstereo import MatchStereo
from crossview.models.matchstereo.specs import matchstereo_spec
from crossview.models.registry import FusedNetwork, ModelSpec, register_model
from small_networks import SMALL
from video_files import write_lossless_video

register_model(ModelSpec("cli-test-stereo-video", lambda: MatchStereo(SMALL), "stereo"),
               replace=True)
register_model(matchstereo_spec("cli-test-stereo-video-aligned", SMALL, "stereo", fuse=True,
                                fused_network=FusedNetwork(align_px=0.5)), replace=True)
FAST = ["--model", "cli-test-stereo-video", "--format", "npy"]
H, W = 192, 192
pytestmark = pytest.mark.filterwarnings("ignore::crossview.api.RandomWeightsWarning")


def _views(count: int, w: int = W) -> list[tuple[np.ndarray, np.ndarray]]:
    """``count`` stereo frames of a texture panning right, the right view 4 px to the left."""
    rng = np.random.default_rng(5)
    wide = rng.integers(0, 256, (H, w + 4 + 2 * count, 3), dtype=np.uint8)
    return [(wide[:, 2 * i + 4: 2 * i + 4 + w], wide[:, 2 * i: 2 * i + w]) for i in range(count)]


def _two_videos(tmp_path: Path, count: int) -> tuple[Path, Path]:
    views = _views(count)
    left, right = tmp_path / "left.mkv", tmp_path / "right.mkv"
    write_lossless_video(left, [a for a, _ in views])
    write_lossless_video(right, [b for _, b in views])
    return left, right


def _folders(tmp_path: Path, count: int) -> tuple[Path, Path]:
    """Two folders of frames named without leading zeros (name order is numeric)."""
    for side in ("l", "r"):
        (tmp_path / side).mkdir()
    for i, (a, b) in enumerate(_views(count)):
        Image.fromarray(a).save(tmp_path / "l" / f"f{5 * i}.png")
        Image.fromarray(b).save(tmp_path / "r" / f"g{5 * i}.png")
    return tmp_path / "l", tmp_path / "r"


def _run(args: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    with pytest.raises(SystemExit) as done:
        main(["stereo", *args])
    captured = capsys.readouterr()
    return done.value.code, captured.out, captured.err


def _npys(out_dir: Path) -> set[str]:
    return {p.name for p in out_dir.glob("*_disp.npy")}


def test_two_videos_give_one_pair_per_frame_named_by_index(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Frame 2 of the two videos gives the disparity of its two images given as files, when
    started cold (the same random weights: the same seed)."""
    left, right = _two_videos(tmp_path, 3)
    torch.manual_seed(0)
    code, out, err = _run([str(left), str(right), "-o", str(tmp_path / "out"), "--cold-start",
                           *FAST], capsys)
    assert code == 0, err
    assert out == f"wrote 3 pair(s) to {tmp_path / 'out'}\n"
    assert _npys(tmp_path / "out") == {f"left_{i:06d}_disp.npy" for i in range(3)}
    a, b = _views(3)[2]
    Image.fromarray(a).save(tmp_path / "a.png")
    Image.fromarray(b).save(tmp_path / "b.png")
    torch.manual_seed(0)
    code, _, err = _run([str(tmp_path / "a.png"), str(tmp_path / "b.png"), "-o",
                         str(tmp_path / "png"), *FAST], capsys)
    assert code == 0, err
    np.testing.assert_array_equal(io.read_npy(tmp_path / "out" / "left_000002_disp.npy"),
                                  io.read_npy(tmp_path / "png" / "a_disp.npy"))


def test_a_side_by_side_video_is_the_two_videos_side_by_side(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    views = _views(3)
    left, right = _two_videos(tmp_path, 3)
    write_lossless_video(tmp_path / "sbs.mkv", [np.hstack(pair) for pair in views])
    for args, out_dir in (([str(left), str(right)], "two"),
                          ([str(tmp_path / "sbs.mkv"), "--side-by-side"], "sbs")):
        torch.manual_seed(0)
        code, _, err = _run([*args, "-o", str(tmp_path / out_dir), *FAST], capsys)
        assert code == 0, err
    assert _npys(tmp_path / "sbs") == {f"sbs_{i:06d}_disp.npy" for i in range(3)}
    for i in range(3):  # warm-started alike
        np.testing.assert_array_equal(io.read_npy(tmp_path / "sbs" / f"sbs_{i:06d}_disp.npy"),
                                      io.read_npy(tmp_path / "two" / f"left_{i:06d}_disp.npy"))


@pytest.mark.parametrize(("options", "frames"), [
    ([], [0, 1, 2, 3, 4]),
    (["--start", "1", "--stride", "2"], [1, 3]),
    (["--start", "3", "--stop", "4"], [3]),
])
@pytest.mark.parametrize("kind", ["videos", "folders"])
def test_a_frame_range_picks_the_pairs(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                       kind: str, options: list[str], frames: list[int]) -> None:
    """Frames start, start + stride, ... before stop, each one pair; a video's named by its
    index, a folder's by the left file's name."""
    sources = _two_videos(tmp_path, 5) if kind == "videos" else _folders(tmp_path, 5)
    code, out, err = _run([*map(str, sources), "-o", str(tmp_path / "out"), *options, *FAST],
                          capsys)
    assert code == 0, err
    assert out == f"wrote {len(frames)} pair(s) to {tmp_path / 'out'}\n"
    names = [f"left_{i:06d}" if kind == "videos" else f"f{5 * i}" for i in frames]
    assert _npys(tmp_path / "out") == {f"{name}_disp.npy" for name in names}


def _spy_calls(monkeypatch: pytest.MonkeyPatch) -> list[dict[str, object]]:
    """The keyword arguments of every ``estimate_disparity`` call of the command."""
    calls: list[dict[str, object]] = []
    estimate = api.estimate_disparity

    def spy(*args: object, **kwargs: object) -> object:
        calls.append(kwargs)
        return estimate(*args, **kwargs)

    monkeypatch.setattr(api, "estimate_disparity", spy)
    return calls


@pytest.mark.parametrize(("kind", "options", "warm"), [
    ("videos", [], True), ("videos", ["--cold-start"], False),
    ("folders", [], False), ("folders", ["--warm-start"], True)])
def test_the_warm_start_passes_the_previous_frames_disparity(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch,
        kind: str, options: list[str], warm: bool) -> None:
    """Warm (videos by default, folders with --warm-start): frame i starts from frame i - 1's
    disparity of both views; cold: from nothing."""
    sources = _two_videos(tmp_path, 3) if kind == "videos" else _folders(tmp_path, 3)
    calls = _spy_calls(monkeypatch)
    code, _, err = _run([*map(str, sources), "-o", str(tmp_path / "out"), *options, *FAST],
                        capsys)
    assert code == 0, err
    inits = [call.get("init") for call in calls]
    assert len(inits) == 3 and inits[0] is None
    if not warm:
        assert inits == [None, None, None]
        return
    names = [f"left_{i:06d}" if kind == "videos" else f"f{5 * i}" for i in range(3)]
    for init, name in zip(inits[1:], names[:-1], strict=True):
        assert init.shape == (2, H, W, 2)
        np.testing.assert_allclose(-init[0, ..., 0].numpy(),
                                   io.read_npy(tmp_path / "out" / f"{name}_disp.npy"),
                                   atol=1e-6)


@pytest.mark.parametrize(("options", "measured"), [([], 1), (["--cold-start"], 3)])
def test_a_warm_video_measures_its_rows_once(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch,
        options: list[str], measured: int) -> None:
    """A fused model that lines rows up: a warm-started video (one rig) measures the rows'
    offset on its first frame and gives it to the next frames (within
    ``api.ROWS_MEASURED_EVERY``); started cold, every frame is measured."""
    measures, measure = [], inference.measure_rows

    def counted(*args: object, **kwargs: object) -> object:
        measures.append(1)
        return measure(*args, **kwargs)

    monkeypatch.setattr(inference, "measure_rows", counted)
    calls = _spy_calls(monkeypatch)
    code, _, err = _run([*map(str, _two_videos(tmp_path, 3)), "-o", str(tmp_path / "out"),
                         *options, "--model", "cli-test-stereo-video-aligned", "--format", "npy"],
                        capsys)
    assert code == 0, err
    assert len(measures) == measured
    given = [call.get("row_offset") is not None for call in calls]
    assert given == ([False, True, True] if measured == 1 else [False, False, False])


@pytest.mark.parametrize("calibrated", [False, True])
def test_save_video_shows_every_frame(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                      calibrated: bool) -> None:
    """STEM_disp.mp4 (STEM_depth.mp4 with a calibration): one frame per pair in order, at the
    video's rate over the stride, each the saved map on the run's one colour range."""
    left, right = _two_videos(tmp_path, 5)
    out_dir = tmp_path / "out"
    calib = ["--focal", "100", "--baseline", "0.1"] if calibrated else []
    code, out, err = _run([str(left), str(right), "-o", str(out_dir), "--stride", "2",
                           "--save-video", *calib, *FAST], capsys)
    assert code == 0, err
    kind = "depth" if calibrated else "disp"
    path = out_dir / f"left_{kind}.mp4"
    assert f"wrote {path} (3 frames at 2.5 per second; " in out
    got = list(video.frames(path))
    assert len(got) == 3
    files = [out_dir / f"left_{i:06d}_{kind}.npy" for i in (0, 2, 4)]
    maps = [disparity_video.read_map(f, calibrated) for f in files]
    low, high = disparity_video.colour_range(maps)
    for frame, values in zip(got, maps, strict=True):
        want = disparity_video.colour_frame(values, low, high, calibrated)
        assert frame.shape[:2] == want.shape[:2]
        assert np.abs(frame.astype(int) - want).mean() < 6  # H.264 at quality 18


def test_a_failing_frame_is_reported_and_skipped(tmp_path: Path,
                                                 capsys: pytest.CaptureFixture[str]) -> None:
    """An unreadable frame and a frame whose views differ in size: each one line, the other
    frames written, exit code 1, no video."""
    left, right = _folders(tmp_path, 4)
    (left / "f5.png").write_bytes(b"not a png")
    Image.fromarray(_views(1, w=W + 32)[0][1]).save(right / "g10.png")
    out_dir = tmp_path / "out"
    code, _, err = _run([str(left), str(right), "-o", str(out_dir), "--save-video", *FAST],
                        capsys)
    assert code == 1, err
    errors = [line for line in err.splitlines() if line.startswith("error:")]
    assert len(errors) == 2 and all(line.endswith("(pair skipped)") for line in errors), err
    assert "f5.png" in errors[0] and "f10.png" in errors[1]
    assert _npys(out_dir) == {"f0_disp.npy", "f15_disp.npy"}
    assert "2 pair(s) failed" in err and not (out_dir / "l_disp.mp4").exists()


def test_ctrl_c_keeps_the_finished_frames(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                          monkeypatch: pytest.MonkeyPatch) -> None:
    """Ctrl-C while the second frame runs: exit code 130, the first frame's files kept, the
    second's not written (no temporary file either), no video."""
    left, right = _two_videos(tmp_path, 4)
    out_dir = tmp_path / "out"
    calls: list[int] = []
    estimate = api.estimate_disparity

    def interrupted(*args: object, **kwargs: object) -> object:
        result = estimate(*args, **kwargs)
        calls.append(1)
        if len(calls) == 2:
            signal.raise_signal(signal.SIGINT)
        return result

    monkeypatch.setattr(api, "estimate_disparity", interrupted)
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        code, out, err = _run([str(left), str(right), "-o", str(out_dir), "--save-video",
                               *FAST], capsys)
    finally:
        signal.signal(signal.SIGINT, previous)
    assert code == 130, err
    assert out.splitlines()[0].startswith(f"wrote 1 pair(s) to {out_dir}; interrupted")
    assert sorted(p.name for p in out_dir.iterdir()) == [
        f"left_000000_disp{end}" for end in (".npy", "_color.png", "_noc.png")]
    assert "left_disp.mp4 not written" in err


def _bad_inputs(tmp_path: Path) -> dict[str, tuple[list[str], str]]:
    views = _views(3)
    left, right = _two_videos(tmp_path, 3)
    write_lossless_video(tmp_path / "short.mkv", [b for _, b in views[:2]])
    write_lossless_video(tmp_path / "wide.mkv", [np.hstack([b, b[:, :32]]) for _, b in views])
    write_lossless_video(tmp_path / "odd.mkv", [np.hstack([a, b[:, :33]]) for a, b in views])
    (tmp_path / "empty").mkdir()
    (tmp_path / "empty2").mkdir()
    Image.fromarray(views[0][0]).save(tmp_path / "a.png")
    return {
        "sizes": ([str(left), str(tmp_path / "wide.mkv")],
                  f"{left} is 192x192 but {tmp_path / 'wide.mkv'} is 224x192 (W x H); the two "
                  "views need one size"),
        "counts": ([str(left), str(tmp_path / "short.mkv")],
                   f"{left} holds 3 frames but {tmp_path / 'short.mkv'} holds 2; the two views "
                   "need one frame each"),
        "odd width": ([str(tmp_path / "odd.mkv"), "--side-by-side"],
                      f"{tmp_path / 'odd.mkv'}: a side-by-side video needs an even width "
                      "(left half = left view), got 225 px"),
        "empty folder": ([str(tmp_path / "empty"), str(tmp_path / "empty2"), "--stride", "2"],
                         f"{tmp_path / 'empty'}: no images in this directory"),
        "one video": ([str(left)], "give two images, directories, patterns or videos (or one "
                      "side-by-side video or folder of frames with --side-by-side)"),
        "video and image": ([str(left), str(tmp_path / "a.png")], "give two videos"),
        "side-by-side twice": ([str(left), str(right), "--side-by-side"],
                               "--side-by-side takes one video file or one folder"),
        "past the end": ([str(left), str(right), "--start", "5"],
                         f"{left} holds 3 frames; --start 5 picks 0: a stereo run needs one"),
        "files with a range": ([str(tmp_path / "a.png"), str(tmp_path / "a.png"), "--start",
                                "1"], "--start 1 needs videos or folders of frames"),
        "video of files": ([str(tmp_path / "a.png"), str(tmp_path / "a.png"), "--save-video"],
                           "--save-video needs videos or folders of frames"),
    }


@pytest.mark.parametrize("case", ["sizes", "counts", "odd width", "empty folder", "one video",
                                  "video and image", "side-by-side twice", "past the end",
                                  "files with a range", "video of files"])
def test_bad_input_is_one_line_exit_2_no_output(tmp_path: Path,
                                                capsys: pytest.CaptureFixture[str],
                                                case: str) -> None:
    args, message = _bad_inputs(tmp_path)[case]
    code, out, err = _run([*args, "-o", str(tmp_path / "out"), *FAST], capsys)
    lines = [line for line in err.splitlines() if not line.startswith("warning:")]
    assert code == 2 and out == "" and len(lines) == 1, err
    assert lines[0].startswith("error: ") and message in lines[0], err
    assert not (tmp_path / "out").exists()


def test_the_colour_range_spans_every_frame() -> None:
    ramp = np.linspace(0, 100, 101).reshape(1, 101)
    assert disparity_video.colour_range([ramp, ramp + 50, np.full((1, 3), np.nan)]) == (1, 149)
    assert disparity_video.colour_range([np.full((2, 2), np.nan)]) == (0.0, 1.0)


def test_the_disparity_video_refuses_maps_of_two_sizes(tmp_path: Path) -> None:
    io.write_npy(tmp_path / "a.npy", np.ones((4, 6), np.float32))
    io.write_npy(tmp_path / "b.npy", np.ones((4, 8), np.float32))
    from fractions import Fraction

    from crossview.errors import UserError
    with pytest.raises(UserError, match="a video's frames have one size"):
        disparity_video.write_disparity_video(tmp_path / "v.mp4", [tmp_path / "a.npy",
                                                                  tmp_path / "b.npy"],
                                              Fraction(5))
    assert not (tmp_path / "v.mp4").exists()


