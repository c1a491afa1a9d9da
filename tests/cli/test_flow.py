"""``crossview flow``: outputs and formats, backward flow, sequences and their flow video, and
the bad-input contract."""

from __future__ import annotations

import re
import signal
from collections.abc import Callable
from fractions import Fraction
from pathlib import Path

import numpy as np
import pytest
import skimage.data
import torch
from PIL import Image

from crossview import api
from crossview.cli.app import main
from crossview.data import flow_video, io, video
from crossview.models.matchstereo import MatchStereo
from crossview.models.registry import ModelSpec, register_model
from small_networks import SMALL
from video_files import declare_frames, write_lossless_video

# A small registered flow model keeps the runs short; the command is the same for matchflow-b.
register_model(ModelSpec("cli-test-flow", lambda: MatchStereo(SMALL, task="flow"), "flow"),
               replace=True)
FAST = ["--model", "cli-test-flow"]


def _frames(folder: Path, h: int = 192, w: int = 192) -> tuple[Path, Path]:
    rng = np.random.default_rng(1)
    frame = rng.integers(0, 256, (h, w, 3), dtype=np.uint8)
    paths = folder / "f0.png", folder / "f1.png"
    Image.fromarray(frame).save(paths[0])
    Image.fromarray(np.roll(frame, (2, -3), axis=(0, 1))).save(paths[1])
    return paths


def _run(args: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    with pytest.raises(SystemExit) as done:
        main(args)
    captured = capsys.readouterr()
    return done.value.code, captured.out, captured.err


@pytest.mark.parametrize("fmt,suffix", [("flo", ".flo"), ("pfm", ".pfm"), ("png16", ".png"),
                                        ("npy", ".npy")])
def test_formats(tmp_path: Path, capsys: pytest.CaptureFixture[str], fmt: str,
                 suffix: str) -> None:
    f0, f1 = _frames(tmp_path)
    code, _, err = _run(["flow", str(f0), str(f1), "-o", str(tmp_path / "out"), "--format", fmt,
                         *FAST], capsys)
    assert code == 0, err
    path = tmp_path / "out" / f"f0_flow{suffix}"
    reader = {"flo": io.read_flo, "pfm": io.read_pfm, "npy": io.read_npy,
              "png16": lambda p: io.read_kitti_flow(p)[0]}[fmt]
    flow = reader(path)
    assert flow.shape == ((192, 192, 3) if fmt == "pfm" else (192, 192, 2))
    if fmt == "pfm":
        assert (flow[..., 2] == 0).all()


def test_png16_round_trips_through_the_kitti_reader(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """The refined flow is a transposed view in memory (as the bundled models' default
    refinement gives it): png16 writes it, and the KITTI reader gives back the npy flow to
    KITTI's 1/64 px."""
    f0, f1 = _frames(tmp_path)
    flows = {}
    for fmt in ("npy", "png16"):
        torch.manual_seed(0)
        code, _, err = _run(["flow", str(f0), str(f1), "-o", str(tmp_path / fmt), "--format",
                             fmt, "--refine", *FAST], capsys)
        assert code == 0, err
        flows[fmt] = (io.read_npy(tmp_path / "npy" / "f0_flow.npy") if fmt == "npy"
                      else io.read_kitti_flow(tmp_path / "png16" / "f0_flow.png"))
    flow, valid = flows["png16"]
    assert valid.all()
    np.testing.assert_allclose(flow, np.clip(flows["npy"], -512, 511.98), rtol=0,
                               atol=0.5 / 64 + 1e-6)


def test_default_model_is_the_bundled_one(tmp_path: Path,
                                          capsys: pytest.CaptureFixture[str]) -> None:
    """Without --model the bundled default flow model runs (no random-weights warning) and finds the
    frames' shift: frame 1 is scikit-image's cat photograph (held out from training) moved 2 px
    down and 3 px left."""
    frame = np.asarray(Image.fromarray(skimage.data.chelsea()).resize((256, 192)))
    f0, f1 = tmp_path / "f0.png", tmp_path / "f1.png"
    Image.fromarray(frame).save(f0)
    Image.fromarray(np.roll(frame, (2, -3), axis=(0, 1))).save(f1)
    code, out, err = _run(["flow", str(f0), str(f1), "-o", str(tmp_path / "out")], capsys)
    assert code == 0, err
    assert "meaningless" not in err and "wrote 1 pair" in out
    flow = io.read_flo(tmp_path / "out" / "f0_flow.flo")
    inner = flow[16:-16, 16:-16].reshape(-1, 2)  # away from the rolled-in borders
    assert np.allclose(np.median(inner, axis=0), [-3.0, 2.0], atol=0.5)


def test_backward_rpos_and_colour_wheel(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    f0, f1 = _frames(tmp_path)
    code, _, err = _run(["flow", str(f0), str(f1), "-o", str(tmp_path / "out"), "--save-right",
                           "--save-rpos", "--lri", *FAST], capsys)
    assert code == 0, err  # --lri: a 192 px pair's half is below the least size: no half pass
    code, _, err = _run(["flow", str(f0), str(f1), "-o", str(tmp_path / "out"), "--save-right",
                           "--save-rpos", "--size", "224x256", *FAST], capsys)
    assert code == 0, err
    names = {p.name for p in (tmp_path / "out").iterdir()}
    assert names == {f"f0_flow{view}{kind}" for view in ("", "_backward")
                     for kind in (".flo", "_color.png", "_noc.png", "_rpos.png")}
    forward = io.read_flo(tmp_path / "out" / "f0_flow.flo")
    colour = io.read_image(tmp_path / "out" / "f0_flow_color.png")
    from crossview.viz import flow_colour_key, flow_to_colour

    # the flow's pixels, and on the right the colour-wheel key at the flow's largest magnitude
    key = flow_colour_key(float(np.hypot(*forward.astype(np.float64).transpose(2, 0, 1)).max()),
                          192 // 8)
    assert colour.shape == (192, 192 + key.shape[1], 3)
    np.testing.assert_array_equal(colour[:, :192], flow_to_colour(forward))
    np.testing.assert_array_equal(colour[:key.shape[0], 192:], key)
    assert (colour[key.shape[0]:, 192:] == 255).all()


def test_bad_inputs_exit_2(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                           monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CROSSVIEW_MAX_MEMORY_GB", "16")  # the same limit on every machine
    f0, f1 = _frames(tmp_path)
    odd = tmp_path / "odd.png"
    Image.fromarray(np.zeros((192, 200, 3), np.uint8)).save(odd)
    for args, message in (([str(f0), str(tmp_path / "none.png")], "no such file"),
                          ([str(f0), str(odd)], "a pair needs one size"),
                          ([str(tmp_path / "*.jpg"), str(f0)], "no file matches"),
                          ([str(tmp_path), str(f0)], "two files, two directories"),
                          ([str(f0), str(f1), "--size", "8000x8000"],  # all-pairs volume
                           "cli-test-flow at 8000x8000 px (images of 192x192 px resized) needs"),
                          ([str(f0), str(f1), "--device", "meta"], "--device 'meta': device "
                           "type 'meta' holds no data")):
        code, _, err = _run(["flow", *args, "-o", str(tmp_path / "out"), *FAST], capsys)
        lines = [line for line in err.splitlines() if not line.startswith("warning:")]
        assert code == 2 and len(lines) == 1, err
        assert lines[0].startswith("error: ") and message in lines[0], err
    assert not (tmp_path / "out").exists()


def test_a_stereo_model_is_refused_and_leaves_no_output(tmp_path: Path,
                                                       capsys: pytest.CaptureFixture[str]) -> None:
    f0, f1 = _frames(tmp_path)
    code, out, err = _run(["flow", str(f0), str(f1), "-o", str(tmp_path / "out"), "--model",
                           "matchstereo-mini"], capsys)
    assert code == 2 and out == ""
    assert err.strip() == ("error: model 'matchstereo-mini' estimates stereo; crossview flow "
                           "needs a flow model")
    assert not (tmp_path / "out").exists()


def test_a_pair_failing_at_inference_is_skipped_and_the_others_written(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """The first pair runs, the second is too small for the model: the first is written, the
    second reported, exit code 1."""
    for name, size in (("a", 192), ("b", 96)):
        (tmp_path / name).mkdir()
        _frames(tmp_path / name, size, size)
    code, _, err = _run(["flow", str(tmp_path / "*" / "f0.png"), str(tmp_path / "*" / "f1.png"),
                         "-o", str(tmp_path / "out"), *FAST], capsys)
    lines = [line for line in err.splitlines() if not line.startswith(("warning:", "pair "))]
    assert code == 1 and len(lines) == 2, err
    assert lines[0].startswith(f"error: {tmp_path / 'b' / 'f0.png'} and ") and "too small" in err
    assert {p.name for p in (tmp_path / "out").iterdir()} == {
        "a_f0_flow.flo", "a_f0_flow_color.png", "a_f0_flow_noc.png"}


def _video_frames() -> list[np.ndarray]:
    rng = np.random.default_rng(2)
    first = rng.integers(0, 256, (192, 192, 3), dtype=np.uint8)
    return [np.roll(first, (i, -2 * i), axis=(0, 1)) for i in range(3)]


def test_a_video_gives_one_pair_per_consecutive_frames(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Pair 1 of the video (frames 1 and 2) gives the same flow as those frames given as
    PNG files (same seed, so the same random weights)."""
    frames = _video_frames()
    write_lossless_video(tmp_path / "clip.mkv", frames)
    torch.manual_seed(0)
    code, out, err = _run(["flow", str(tmp_path / "clip.mkv"), "-o", str(tmp_path / "out"),
                           "--format", "npy", *FAST], capsys)
    assert code == 0, err
    assert out == f"wrote 2 pair(s) to {tmp_path / 'out'}\n"
    # off a terminal, a progress line per pair (numbered only: this container declares no
    # frame count)
    progress = [line for line in err.splitlines() if line.startswith("pair ")]
    assert [re.sub(r" \(\d+\.\d s\)$", "", line) for line in progress] == [
        "pair 1: clip_000000", "pair 2: clip_000001"], err
    assert {p.name for p in (tmp_path / "out").glob("*.npy")} == {
        "clip_000000_flow.npy", "clip_000001_flow.npy"}
    for index in (1, 2):
        Image.fromarray(frames[index]).save(tmp_path / f"frame{index}.png")
    torch.manual_seed(0)
    code, _, err = _run(["flow", str(tmp_path / "frame1.png"), str(tmp_path / "frame2.png"),
                         "-o", str(tmp_path / "png"), "--format", "npy", *FAST], capsys)
    assert code == 0, err
    np.testing.assert_array_equal(io.read_npy(tmp_path / "out" / "clip_000001_flow.npy"),
                                  io.read_npy(tmp_path / "png" / "frame1_flow.npy"))


@pytest.mark.parametrize("case", ["undecodable", "empty file", "two inputs", "missing",
                                  "one frame"])
def test_bad_video_input_is_one_line_exit_2_no_output(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], case: str) -> None:
    pytest.importorskip("av")
    bad = tmp_path / "bad.mp4"
    bad.write_bytes(b"\x00\x00\x00\x18ftypmp42 not a video" * 10)
    (tmp_path / "empty.mp4").write_bytes(b"")
    write_lossless_video(tmp_path / "still.mkv", _video_frames()[:1])
    f0, _ = _frames(tmp_path)
    args, message = {
        "undecodable": ([str(bad)], f"{bad}: cannot decode video"),
        "empty file": ([str(tmp_path / "empty.mp4")], "empty.mp4: cannot decode video"),
        "two inputs": ([str(bad), str(f0)], "flow also takes one video file"),
        "missing": ([str(tmp_path / "none.mp4")], "none.mp4: no such file"),
        "one frame": ([str(tmp_path / "still.mkv")],
                      f"{tmp_path / 'still.mkv'}: the video holds only 1 frame(s), 2 needed "
                      "(flow pairs consecutive frames)"),
    }[case]
    code, out, err = _run(["flow", *args, "-o", str(tmp_path / "out"), *FAST], capsys)
    lines = [line for line in err.splitlines() if not line.startswith("warning:")]
    assert code == 2 and out == "" and len(lines) == 1, err
    assert lines[0].startswith("error: ") and message in lines[0], err
    assert not (tmp_path / "out").exists()


def _sequence(tmp_path: Path, kind: str, count: int) -> tuple[Path, list[np.ndarray]]:
    """``count`` frames of a moving texture as a lossless video or as a folder of PNG files
    numbered without leading zeros (f0.png, f5.png, f10.png, ...: name order is numeric)."""
    rng = np.random.default_rng(3)
    first = rng.integers(0, 256, (192, 192, 3), dtype=np.uint8)
    frames = [np.roll(first, (i, -2 * i), axis=(0, 1)) for i in range(count)]
    if kind == "video":
        write_lossless_video(tmp_path / "clip.mkv", frames)
        return tmp_path / "clip.mkv", frames
    (tmp_path / "frames").mkdir()
    for index, frame in enumerate(frames):
        Image.fromarray(frame).save(tmp_path / "frames" / f"f{5 * index}.png")
    return tmp_path / "frames", frames


@pytest.mark.parametrize("kind", ["video", "folder"])
@pytest.mark.parametrize(("options", "pairs"), [
    ([], [(0, 1), (1, 2), (2, 3), (3, 4), (4, 5), (5, 6)]),
    (["--start", "1", "--stride", "2"], [(1, 3), (3, 5)]),
    (["--start", "4", "--stop", "6"], [(4, 5)]),
    (["--stop", "5", "--stride", "2"], [(0, 2), (2, 4)]),
])
def test_a_video_or_a_folder_of_frames_with_a_frame_range(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], kind: str, options: list[str],
        pairs: list[tuple[int, int]]) -> None:
    """Frames start, start + stride, ... before stop, each paired with the next of them;
    a video's pairs are named by the first frame's index, a folder's by the first frame's
    name. The last pair's flow is that of its two frames given as files (same seed)."""
    source, frames = _sequence(tmp_path, kind, 7)
    torch.manual_seed(0)
    code, out, err = _run(["flow", str(source), "-o", str(tmp_path / "out"), "--format", "npy",
                           *options, *FAST], capsys)
    assert code == 0, err
    assert out == f"wrote {len(pairs)} pair(s) to {tmp_path / 'out'}\n"
    def name(index: int) -> str:
        return f"clip_{index:06d}" if kind == "video" else f"f{5 * index}"

    assert {p.name for p in (tmp_path / "out").glob("*.npy")} == {
        f"{name(a)}_flow.npy" for a, _ in pairs}
    a, b = pairs[-1]
    for index in (a, b):
        Image.fromarray(frames[index]).save(tmp_path / f"frame{index}.png")
    torch.manual_seed(0)
    code, _, err = _run(["flow", str(tmp_path / f"frame{a}.png"), str(tmp_path / f"frame{b}.png"),
                         "-o", str(tmp_path / "png"), "--format", "npy", *FAST], capsys)
    assert code == 0, err
    np.testing.assert_array_equal(io.read_npy(tmp_path / "out" / f"{name(a)}_flow.npy"),
                                  io.read_npy(tmp_path / "png" / f"frame{a}_flow.npy"))


@pytest.mark.parametrize("kind", ["video", "folder"])
@pytest.mark.parametrize(("options", "message"), [
    (["--stride", "0"], "--stride must be 1 or more"),
    (["--start", "-1"], "--start must be a frame index, 0 or more, got -1"),
    (["--start", "3", "--stop", "3"], "--start 3 must be below --stop 3"),
    (["--start", "1", "--stop", "3", "--stride", "2"],
     "--start 1 --stop 3 --stride 2 picks one frame (1); a flow pair needs two"),
    (["--start", "2"], "holds 3 frames; --start 2 picks 1: a flow pair needs two"),
    (["--start", "7", "--stride", "2"], "holds 3 frames; --start 7 --stride 2 picks 0: a flow "
                                        "pair needs two"),
])
def test_a_frame_range_without_a_pair_is_one_line_exit_2_no_output(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], kind: str, options: list[str],
        message: str) -> None:
    source, _ = _sequence(tmp_path, kind, 3)
    code, out, err = _run(["flow", str(source), "-o", str(tmp_path / "out"), *options, *FAST],
                          capsys)
    assert code == 2 and out == "" and len(err.splitlines()) == 1, err
    assert err.startswith("error: ") and message in err, err
    assert not (tmp_path / "out").exists()


def test_frame_options_need_a_sequence_and_a_sequence_two_frames(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    f0, f1 = _frames(tmp_path)
    (tmp_path / "one").mkdir()
    f0.rename(tmp_path / "one" / "f0.png")
    for args, message in (
            ([str(tmp_path / "one" / "f0.png"), str(f1), "--stride", "2"],
             "--stride 2 needs one video file or one folder of frames, not two inputs"),
            ([str(tmp_path / "one")], f"{tmp_path / 'one'} holds 1 frame: a flow pair needs two")):
        code, out, err = _run(["flow", *args, "-o", str(tmp_path / "out"), *FAST], capsys)
        assert code == 2 and out == "" and err == f"error: {message}\n", err
    assert not (tmp_path / "out").exists()


def test_a_video_holding_fewer_frames_than_it_declares_gives_its_pairs_and_one_warning(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    clip = tmp_path / "clip.avi"
    write_lossless_video(clip, _video_frames())
    declare_frames(clip, 5)
    code, out, err = _run(["flow", str(clip), "-o", str(tmp_path / "out"), "--format", "npy",
                           *FAST], capsys)
    assert code == 0, err
    assert out == f"wrote 2 pair(s) to {tmp_path / 'out'}\n"
    warnings = [line for line in err.splitlines() if "declares" in line]
    assert warnings == [f"warning: {clip}: the container declares 5 frames but 3 decoded (a "
                        "truncated or damaged file?); used the decoded ones"], err
    assert sorted(p.name for p in (tmp_path / "out").glob("*.npy")) == [
        "clip_000000_flow.npy", "clip_000001_flow.npy"]


def _video_of(out_dir: Path, names: list[str], scale: float) -> None:
    """The flow video in ``out_dir`` holds one frame per pair of ``names``, in order: each
    pair's saved flow on the colour wheel at the video's one ``scale`` (H.264 at quality 18:
    within a few levels of it on average)."""
    [path] = out_dir.glob("*.mp4")
    got = list(video.frames(path))
    assert len(got) == len(names)
    for frame, name in zip(got, names, strict=True):
        want = flow_video.flow_to_colour(io.read_npy(out_dir / f"{name}_flow.npy"),
                                         max_flow=scale)
        assert frame.shape == (want.shape[0] + 1, want.shape[1] + 1, 3)  # odd sides padded
        assert np.abs(frame[:-1, :-1].astype(float) - want).mean() < 4


def _scale(out: str) -> float:
    """The colour scale the command printed (``... full colour at S px)``)."""
    return float(out.rsplit("full colour at ", 1)[1].split(" px")[0])


def _sequence_of_odd_sides(tmp_path: Path, kind: str, count: int) -> Path:
    """``count`` frames 163x161 (W x H, odd, as H.264's yuv420p does not take them) as a
    lossless video (5 frames per second) or a folder of PNG files."""
    rng = np.random.default_rng(4)
    first = rng.integers(0, 256, (161, 163, 3), dtype=np.uint8)
    frames = [np.roll(first, (i, -2 * i), axis=(0, 1)) for i in range(count)]
    if kind == "video":
        write_lossless_video(tmp_path / "clip.mkv", frames)
        return tmp_path / "clip.mkv"
    (tmp_path / "frames").mkdir()
    for index, frame in enumerate(frames):
        Image.fromarray(frame).save(tmp_path / "frames" / f"f{index}.png")
    return tmp_path / "frames"


@pytest.mark.parametrize(("kind", "options", "names", "rate"), [
    ("video", ["--stride", "2"], ["clip_000000", "clip_000002", "clip_000004"], Fraction(5, 2)),
    ("folder", [], ["f0", "f1", "f2", "f3", "f4", "f5"], Fraction(10)),
])
def test_save_video_writes_one_frame_per_pair_and_a_resumed_run_the_same_video(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch,
        kind: str, options: list[str], names: list[str], rate: Fraction) -> None:
    """The video is STEM_flow.mp4, one frame per pair in order at the source's rate over the
    stride (a folder: 10 per second); a rerun with --skip-existing runs no pair and writes
    the same file from the pairs' saved flows."""
    pytest.importorskip("av")
    source = _sequence_of_odd_sides(tmp_path, kind, 7)
    out_dir = tmp_path / "out"
    args = ["flow", str(source), "-o", str(out_dir), "--format", "npy", "--save-video", *options,
            *FAST]
    code, out, err = _run(args, capsys)
    assert code == 0, err
    stem = "clip" if kind == "video" else "frames"
    first_line, second_line = out.splitlines()
    assert first_line == f"wrote {len(names)} pair(s) to {out_dir}"
    assert second_line.startswith(f"wrote {out_dir / f'{stem}_flow.mp4'} ({len(names)} frames "
                                  f"at {float(rate):g} per second; full colour at ")
    _video_of(out_dir, names, _scale(out))
    assert video.open_video(out_dir / f"{stem}_flow.mp4").rate == rate
    written = (out_dir / f"{stem}_flow.mp4").read_bytes()
    monkeypatch.setattr(api, "estimate_flow", lambda *a, **k: pytest.fail("a pair ran"))
    code, out, err = _run([*args, "--skip-existing"], capsys)
    assert code == 0, err
    assert out.splitlines()[0] == (f"wrote 0 pair(s) to {out_dir}, skipped {len(names)} "
                                   "already there")
    assert (out_dir / f"{stem}_flow.mp4").read_bytes() == written


def _interrupt_at(calls: int) -> Callable[..., object]:
    """A wrapper that raises SIGINT (Ctrl-C) on its ``calls``-th call, after running the
    wrapped function."""
    done: list[int] = []

    def wrap(function: Callable[..., object]) -> Callable[..., object]:
        def interrupted(*args: object, **kwargs: object) -> object:
            result = function(*args, **kwargs)
            done.append(1)
            if len(done) == calls:
                signal.raise_signal(signal.SIGINT)
            return result
        return interrupted
    return wrap


@pytest.mark.parametrize("where", ["a pair", "the video"])
def test_ctrl_c_leaves_no_video_and_a_resumed_run_writes_it(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch,
        where: str) -> None:
    """Ctrl-C while the second pair runs, or while the video's second frame is encoded: exit
    code 130, the finished pairs kept, no video and no temporary file; --skip-existing
    --save-video then runs only the missing pairs and writes the video."""
    pytest.importorskip("av")
    source = _sequence_of_odd_sides(tmp_path, "folder", 4)
    out_dir = tmp_path / "out"
    args = ["flow", str(source), "-o", str(out_dir), "--format", "npy", "--save-video", *FAST]
    if where == "a pair":
        monkeypatch.setattr(api, "estimate_flow", _interrupt_at(2)(api.estimate_flow))
    else:
        monkeypatch.setattr(flow_video, "flow_to_colour",
                            _interrupt_at(2)(flow_video.flow_to_colour))
    # Python's own Ctrl-C handler, also when pytest was started with SIGINT ignored
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        code, out, err = _run(args, capsys)
    finally:
        signal.signal(signal.SIGINT, previous)
    monkeypatch.undo()
    assert code == 130, err
    kept = 1 if where == "a pair" else 3
    assert out.splitlines()[0].startswith(f"wrote {kept} pair(s) to {out_dir}")
    assert err.splitlines()[-1] == (
        f"note: {out_dir / 'frames_flow.mp4'} not written: it needs every pair (--skip-existing "
        "--save-video writes it once they are all there)" if where == "a pair"
        else f"error: interrupted: {out_dir / 'frames_flow.mp4'} not written")
    assert sorted(p.name for p in out_dir.iterdir()) == sorted(
        f"{name}_flow{end}" for name in ("f0", "f1", "f2")[:kept]
        for end in (".npy", "_color.png", "_noc.png"))
    code, out, err = _run([*args, "--skip-existing"], capsys)
    assert code == 0, err
    _video_of(out_dir, ["f0", "f1", "f2"], _scale(out))


def test_save_video_needs_a_video_or_a_folder_of_frames(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
        ) -> None:
    """One pair, or two directories, with --save-video: one error line, exit code 2, before the
    model loads, nothing written."""
    f0, f1 = _frames(tmp_path)
    monkeypatch.setattr(api, "load_model", lambda *a, **k: pytest.fail("the model loaded"))
    for args in ([str(f0), str(f1)], [str(tmp_path), str(tmp_path)]):
        code, out, err = _run(["flow", *args, "-o", str(tmp_path / "out"), "--save-video",
                               *FAST], capsys)
        assert code == 2 and out == "", err
        assert err == ("error: --save-video needs one video file or one folder of frames (the "
                       "video shows its pairs in order), not two inputs\n")
    assert not (tmp_path / "out").exists()
