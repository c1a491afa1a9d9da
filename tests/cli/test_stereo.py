"""``crossview stereo``: outputs, formats, pairing, and one-line errors with exit code 2."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest
import torch
from PIL import Image
from safetensors.torch import save_file

from crossview import api
from crossview.attention.match import NonFiniteError
from crossview.cli.app import main
from crossview.data import io
from crossview.defaults import DEFAULT_STEREO_MODEL
from crossview.models.matchstereo import MatchStereo
from crossview.models.matchstereo.bundle import write_bundle
from crossview.models.registry import ModelSpec, register_model
from hang_guard import HANG_GUARD_SECONDS
from small_networks import SMALL

# A small registered model keeps the runs short; one test uses the real default model.
register_model(ModelSpec("cli-test-stereo", lambda: MatchStereo(SMALL), "stereo"), replace=True)
FAST = ["--model", "cli-test-stereo"]


def _write_pair(folder: Path, h: int = 192, w: int = 200, stem: str = "scene") -> tuple[Path, Path]:
    rng = np.random.default_rng(0)
    left = rng.integers(0, 256, (h, w, 3), dtype=np.uint8)
    folder.mkdir(parents=True, exist_ok=True)
    paths = folder / f"{stem}_l.png", folder / f"{stem}_r.png"
    Image.fromarray(left).save(paths[0])
    Image.fromarray(np.roll(left, -3, axis=1)).save(paths[1])
    return paths


def _run(args: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    with pytest.raises(SystemExit) as done:
        main(args)
    captured = capsys.readouterr()
    return done.value.code, captured.out, captured.err


def test_outputs_of_one_pair(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    left, right = _write_pair(tmp_path / "in")
    code, out, err = _run(["stereo", str(left), str(right), "-o", str(tmp_path / "out"),
                           "--save-right", "--save-rpos"], capsys)
    assert code == 0, err
    assert "meaningless" not in err and "wrote 1 pair" in out  # bundled default weights
    names = sorted(p.name for p in (tmp_path / "out").iterdir())
    assert names == sorted(f"scene_l_disp{view}{kind}" for view in ("", "_right")
                           for kind in (".pfm", "_color.png", "_noc.png", "_rpos.png"))
    disparity = io.read_pfm(tmp_path / "out" / "scene_l_disp.pfm")
    assert disparity.shape == (192, 200) and (disparity >= 0).all()
    colour = io.read_image(tmp_path / "out" / "scene_l_disp_color.png")
    assert colour.shape[0] == 192 and colour.shape[1] > 200  # colour bar on the right
    mask = np.asarray(Image.open(tmp_path / "out" / "scene_l_disp_noc.png"))
    assert mask.shape == (192, 200) and set(np.unique(mask)) <= {0, 255}


def test_a_model_without_weights_warns_that_its_output_is_meaningless(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    left, right = _write_pair(tmp_path / "in")
    code, out, err = _run(["stereo", str(left), str(right), "-o", str(tmp_path / "out"),
                           *FAST], capsys)
    assert code == 0, err
    assert "meaningless" in err and "wrote 1 pair" in out


@pytest.mark.parametrize("fmt,name", [("png16", "scene_l_disp.png"), ("npy", "scene_l_disp.npy")])
def test_raw_formats(tmp_path: Path, capsys: pytest.CaptureFixture[str], fmt: str,
                     name: str) -> None:
    left, right = _write_pair(tmp_path / "in")
    code, _, err = _run(["stereo", str(left), str(right), "-o", str(tmp_path / "out"),
                         "--format", fmt, *FAST], capsys)
    assert code == 0, err
    reference = io.read_npy if fmt == "npy" else (lambda p: io.read_kitti_disparity(p)[0])
    assert reference(tmp_path / "out" / name).shape == (192, 200)


def test_directories_pair_by_name(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    for scene in ("a", "b"):
        left, right = _write_pair(tmp_path / scene)
        (tmp_path / "left").mkdir(exist_ok=True)
        (tmp_path / "right").mkdir(exist_ok=True)
        left.rename(tmp_path / "left" / f"{scene}.png")
        right.rename(tmp_path / "right" / f"{scene}.png")
    code, out, err = _run(["stereo", str(tmp_path / "left"), str(tmp_path / "right"), "-o",
                           str(tmp_path / "out"), "--format", "npy", *FAST], capsys)
    assert code == 0, err
    assert "wrote 2 pair" in out
    assert (tmp_path / "out" / "a_disp.npy").exists() and (tmp_path / "out" / "b_disp.npy").exists()


def test_glob_patterns_with_shared_stems(tmp_path: Path,
                                         capsys: pytest.CaptureFixture[str]) -> None:
    for scene in ("s1", "s2"):
        _write_pair(tmp_path / scene, stem="im")
    code, _, err = _run(["stereo", str(tmp_path / "*" / "im_l.png"),
                         str(tmp_path / "*" / "im_r.png"), "-o", str(tmp_path / "out"),
                         "--format", "npy", *FAST], capsys)
    assert code == 0, err
    assert {p.name for p in (tmp_path / "out").glob("*.npy")} == {"s1_im_l_disp.npy",
                                                                  "s2_im_l_disp.npy"}


@pytest.mark.parametrize("mode", ["L", "RGBA", "P", "I;16"])
def test_image_modes_are_converted(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                   mode: str) -> None:
    left, right = _write_pair(tmp_path / "in")
    for path in (left, right):
        image = Image.open(path)
        image = (image.convert("L").point(lambda v: v * 256, "I").convert("I;16")
                 if mode == "I;16" else image.convert(mode))
        image.save(path)
    code, _, err = _run(["stereo", str(left), str(right), "-o", str(tmp_path / "out"),
                         "--format", "npy", *FAST], capsys)
    assert code == 0, err


@pytest.fixture(scope="module")
def huge_pair(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """An 8000x8000 pair: uniform, so the files are small; only decoding them allocates."""
    folder = tmp_path_factory.mktemp("huge")
    image = Image.new("RGB", (8000, 8000), (90, 120, 150))
    for name in ("l.png", "r.png"):
        image.save(folder / name)
    return folder / "l.png", folder / "r.png"


class _Evil:
    """Unpickling this calls os.system: a weights file must never be unpickled as objects."""

    def __reduce__(self) -> tuple:
        return os.system, ("exit 0",)


def _bad_inputs(tmp_path: Path, huge: tuple[Path, Path]) -> dict[str, tuple[list[str], str]]:
    left, right = _write_pair(tmp_path / "in")
    small_l, small_r = _write_pair(tmp_path / "small", 100, 120)
    other_l, _ = _write_pair(tmp_path / "other", 192, 224)
    corrupt = tmp_path / "in" / "corrupt.png"
    corrupt.write_bytes(b"\x89PNG\r\n\x1a\n not really")
    blocker = tmp_path / "file.txt"
    blocker.write_text("x")
    weights = tmp_path / "w.safetensors"
    weights.write_bytes(b"garbage")
    truncated = tmp_path / "in" / "truncated.png"  # the header reads, the pixels do not
    truncated.write_bytes(left.read_bytes()[:2000])
    pickled = tmp_path / "object.pth"
    torch.save({"model": {}, "args": Path("x")}, pickled)
    text_weights = tmp_path / "notes.pth"
    text_weights.write_text("hello")
    flow_weights = tmp_path / "flow.safetensors"  # same architecture, other task
    write_bundle(MatchStereo(SMALL, task="flow"), flow_weights, name="flow", task="flow")
    evil = tmp_path / "evil.pth"
    torch.save({"model": {}, "x": _Evil()}, evil)
    state = MatchStereo(SMALL).state_dict()
    state["up_masks.4.2.weight"][0] = float("nan")
    nan_weights, nan_pth = tmp_path / "nan.safetensors", tmp_path / "nan.pth"
    empty = tmp_path / "empty"
    empty.mkdir()
    (tmp_path / "partners").mkdir()
    for name in ("scene_r.png", "corrupt.png"):  # shares one name with in/, not scene_l.png
        (tmp_path / "partners" / name).write_bytes(left.read_bytes())
    save_file(state, nan_weights)
    torch.save({"model": state}, nan_pth)
    return {
        "missing": ([str(left), str(tmp_path / "nope.png")], "nope.png: no such file"),
        "corrupt": ([str(left), str(corrupt)], "corrupt.png: cannot read image"),
        "size mismatch": ([str(left), str(other_l)], "a pair needs one size"),
        "too small": ([str(small_l), str(small_r)], "the model needs at least 97x129 px (HxW)"),
        "unwritable": ([str(left), str(right), "-o", str(blocker / "out")],
                       "file.txt: exists and is not a directory"),
        "read-only": ([str(left), str(right), "-o", "/proc/crossview-out"],
                      "cannot write to this output directory"),
        "format": ([str(left), str(right), "--format", "flo"], "cannot hold disparity"),
        "size option": ([str(left), str(right), "--size", "big"], "HxW"),
        "weights": ([str(left), str(right), "--weights", str(weights)], "cannot read weights"),
        "model": ([str(left), str(right), "--model", "nope"], "unknown model"),
        "truncated": ([str(left), str(truncated)], "truncated.png: cannot read image"),
        "flow model": ([str(left), str(right), "--model", "matchflow-mini"],
                       "'matchflow-mini' estimates flow; crossview stereo needs a stereo model"),
        "pickled weights": ([str(left), str(right), "--weights", str(pickled)],
                            "pickled Python objects other than tensors"),
        "text weights": ([str(left), str(right), "--weights", str(text_weights)],
                         "notes.pth: cannot read weights"),
        "precision": ([str(left), str(right), "--precision", "fp8"], "unknown precision"),
        "flow weights": ([str(left), str(right), "--weights", str(flow_weights), *FAST],
                         f"{flow_weights}: the file records task 'flow' but 'stereo' weights"),
        "os.system pickle": ([str(left), str(right), "--weights", str(evil)],
                             "evil.pth: cannot read weights (it holds pickled Python objects "
                             "other than tensors: posix.system; refused for safety"),
        "NaN weights": ([str(left), str(right), "--weights", str(nan_weights), *FAST],
                        "nan.safetensors: tensor 'up_masks.4.2.weight' holds NaN or infinite"),
        "NaN weights pth": ([str(left), str(right), "--weights", str(nan_pth), *FAST],
                            "nan.pth: tensor 'up_masks.4.2.weight' holds NaN or infinite"),
        # the network alone runs at the pair's size
        "huge image": ([str(huge[0]), str(huge[1]), "--no-fuse"],
                       f"{huge[0]} and {huge[1]}: {DEFAULT_STEREO_MODEL} at 8000x8000 px "
                       "needs about "),
        "huge image advice": ([str(huge[0]), str(huge[1]), "--no-fuse"],
                              "more than the 16 GiB available ($CROSSVIEW_MAX_MEMORY_GB); run "
                              "at a lower resolution with --size HxW, or give smaller images"),
        # fused, the default works at 0.7 megapixels (its network at 0.75 of that) and holds
        # the full-size images and fields besides (a limit of 8 GiB for this case)
        "huge fused": ([str(huge[0]), str(huge[1])],
                       f"{huge[0]} and {huge[1]}: {DEFAULT_STEREO_MODEL} at 627x627 px "
                       "(images of 8000x8000 px resized) needs about "),
        # the fused run works at the size asked, its network at 0.75 of that
        "huge size": ([str(left), str(right), "--size", "100000x100000"],
                      f"{DEFAULT_STEREO_MODEL} at 75000x75000 px (images of 192x200 px resized) "
                      "needs about "),
        "large size": ([str(left), str(right), "--size", "20000x20000"],
                       "at 15000x15000 px (images of 192x200 px resized) needs about "),
        "large size advice": ([str(left), str(right), "--size", "20000x20000"],
                              "GiB available ($CROSSVIEW_MAX_MEMORY_GB); give a smaller --size"),
        "device mps": ([str(left), str(right), "--device", "mps"],
                       "--device 'mps': MPS (Apple Metal) is not available on this machine"),
        "device meta": ([str(left), str(right), "--device", "meta"],
                        "--device 'meta': device type 'meta' holds no data"),
        "device foo": ([str(left), str(right), "--device", "foo"],
                       "--device 'foo' is not a device name; available here: cpu"),
        "device cuda": ([str(left), str(right), "--device", "cuda"],
                        "--device 'cuda': CUDA is not available on this machine"),
        "empty folders": ([str(empty), str(empty)], "empty: no images in this directory"),
        "mismatched names": ([str(tmp_path / "in"), str(tmp_path / "partners")],
                             f"{tmp_path / 'in' / 'scene_l.png'} has no partner of that name in "
                             f"{tmp_path / 'partners'} (directories pair by file name)"),
        # stereo takes two videos (tests/cli/test_stereo_video.py): a missing one is named
        "video for stereo": ([str(tmp_path / "clip.mp4")] * 2, f"{tmp_path / 'clip.mp4'}: no such "
                             "file"),
    }


NEEDS = {"device cuda": pytest.mark.skipif(torch.cuda.is_available(), reason="has CUDA"),
         "device mps": pytest.mark.skipif(torch.backends.mps.is_available(), reason="has MPS")}


@pytest.mark.parametrize("case", [
    pytest.param(case, marks=NEEDS.get(case, ()))
    for case in ["missing", "corrupt", "size mismatch", "too small", "unwritable", "format",
                 "size option", "weights", "model", "truncated", "flow model", "pickled weights",
                 "text weights", "precision", "read-only", "flow weights", "os.system pickle",
                 "NaN weights", "NaN weights pth", "huge image", "huge image advice", "huge fused",
                 "huge size", "large size", "large size advice", "device mps", "device meta",
                 "device foo", "device cuda", "empty folders", "mismatched names",
                 "video for stereo"]])
def test_bad_input_is_one_line_exit_2_no_output(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                                monkeypatch: pytest.MonkeyPatch,
                                                huge_pair: tuple[Path, Path], case: str) -> None:
    # the same limit on every machine
    monkeypatch.setenv("CROSSVIEW_MAX_MEMORY_GB", "8" if case == "huge fused" else "16")
    args, message = _bad_inputs(tmp_path, huge_pair)[case]
    out_dir = tmp_path / "out"
    if "-o" not in args:
        args = [*args, "-o", str(out_dir)]
    code, _, err = _run(["stereo", *args], capsys)
    lines = [line for line in err.splitlines() if not line.startswith("warning:")]
    assert code == 2
    assert len(lines) == 1 and lines[0].startswith("error: ") and message in lines[0], err
    assert not out_dir.exists()  # not even an empty directory


def _folders(tmp_path: Path, sizes: dict[str, tuple[int, int]]) -> tuple[Path, Path]:
    """left/NAME.png and right/NAME.png for every NAME of ``sizes`` (its (H, W))."""
    for scene, (h, w) in sizes.items():
        left, right = _write_pair(tmp_path / "in", h, w, stem=scene)
        (tmp_path / "left").mkdir(exist_ok=True)
        (tmp_path / "right").mkdir(exist_ok=True)
        left.rename(tmp_path / "left" / f"{scene}.png")
        right.rename(tmp_path / "right" / f"{scene}.png")
    return tmp_path / "left", tmp_path / "right"


def test_a_failed_pair_is_reported_and_skipped_the_others_are_written(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Pairs 'a' and 'c' run, pair 'b' is too small for the model (found only when it runs):
    a and c are written, b is reported, its older result stays untouched, exit code 1."""
    left, right = _folders(tmp_path, {"a": (192, 200), "b": (100, 120), "c": (192, 200)})
    out_dir = tmp_path / "out"
    out_dir.mkdir()
    (out_dir / "b_disp.npy").write_bytes(b"an earlier result")
    code, out, err = _run(["stereo", str(left), str(right), "-o", str(out_dir), "--format",
                           "npy", *FAST], capsys)
    lines = [line for line in err.splitlines() if not line.startswith(("warning:", "pair "))]
    assert code == 1
    assert lines == [f"error: {left / 'b.png'} and {right / 'b.png'}: images of 100x120 px are "
                     "too small: the model needs at least 161x161 px (HxW) for stereo (padded "
                     "to multiples of 32, >= 192x192) (no output written) (pair skipped)",
                     "1 pair(s) failed"], err
    assert out == f"wrote 2 pair(s) to {out_dir}\n"
    assert {p.name for p in out_dir.iterdir()} == {
        f"{n}_disp{e}" for n in "ac" for e in (".npy", "_color.png", "_noc.png")} | {
        "b_disp.npy"}
    assert (out_dir / "b_disp.npy").read_bytes() == b"an earlier result"
    assert io.read_npy(out_dir / "c_disp.npy").shape == (192, 200)


def test_off_a_terminal_each_pair_is_one_progress_line(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """stderr is no terminal here (a log file, CI): no live bar but a line per pair, saying
    which pair of how many it was and how long it took, or that its files were there."""
    left, right = _folders(tmp_path, {"a": (192, 200), "b": (192, 200)})
    args = ["stereo", str(left), str(right), "-o", str(tmp_path / "out"), "--format", "npy",
            *FAST]
    code, _, err = _run(args, capsys)
    progress = [line for line in err.splitlines() if line.startswith("pair ")]
    assert code == 0 and len(progress) == 2, err
    assert re.fullmatch(r"pair 1/2: a \(\d+\.\d s\)", progress[0]), err
    assert re.fullmatch(r"pair 2/2: b \(\d+\.\d s\)", progress[1]), err
    (tmp_path / "out" / "b_disp.npy").unlink()
    code, _, err = _run([*args, "--skip-existing"], capsys)
    progress = [line for line in err.splitlines() if line.startswith("pair ")]
    assert code == 0 and progress[0] == "pair 1/2: a already there", err
    assert re.fullmatch(r"pair 2/2: b \(\d+\.\d s\)", progress[1]), err


def test_when_every_pair_fails_the_exit_code_is_2_and_nothing_is_written(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    left, right = _folders(tmp_path, {"a": (100, 120), "b": (192, 200)})
    (right / "b.png").write_bytes(b"not an image")
    code, out, err = _run(["stereo", str(left), str(right), "-o", str(tmp_path / "out"),
                           *FAST], capsys)
    assert code == 2 and out == f"wrote 0 pair(s) to {tmp_path / 'out'}\n"
    lines = [line for line in err.splitlines() if not line.startswith(("warning:", "pair "))]
    assert len(lines) == 3 and lines[-1] == "2 pair(s) failed"
    assert "b.png: cannot read image" in lines[1], err
    assert not (tmp_path / "out").exists()


def test_skip_existing_runs_only_the_pairs_not_yet_written(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
        ) -> None:
    left, right = _folders(tmp_path, {"a": (192, 200), "b": (192, 200), "c": (192, 200)})
    out_dir = tmp_path / "out"
    args = ["stereo", str(left), str(right), "-o", str(out_dir), "--format", "npy", *FAST]
    assert _run(args, capsys)[0] == 0
    first = {p.name: p.read_bytes() for p in out_dir.iterdir()}
    (out_dir / "b_disp_noc.png").unlink()  # b is incomplete: it runs again
    ran: list[int] = []
    estimate = api.estimate_disparity
    monkeypatch.setattr(api, "estimate_disparity",
                        lambda *a, **k: ran.append(a[0].shape[0]) or estimate(*a, **k))
    code, out, _ = _run([*args, "--skip-existing"], capsys)
    assert code == 0 and len(ran) == 1
    assert out == f"wrote 1 pair(s) to {out_dir}, skipped 2 already there\n"
    again = {p.name: p.read_bytes() for p in out_dir.iterdir()}
    assert again.keys() == first.keys()  # b complete again (random weights: new values)
    assert {n: v for n, v in again.items() if not n.startswith("b")} == {
        n: v for n, v in first.items() if not n.startswith("b")}


@pytest.mark.parametrize("signum,code,line", [
    (signal.SIGINT, 130, None),
    (signal.SIGTERM, 143, "error: stopped by SIGTERM; outputs not yet published were discarded")])
def test_a_signal_keeps_the_finished_pairs_and_discards_the_running_one(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch,
        signum: int, code: int, line: str | None) -> None:
    """The signal arrives while the second pair runs: the first pair's files stay, the second
    leaves nothing (no staging directory either), the third never runs."""
    left, right = _folders(tmp_path, {"a": (192, 200), "b": (192, 200), "c": (192, 200)})
    calls: list[int] = []
    estimate = api.estimate_disparity

    def interrupted(*args: object, **kwargs: object) -> object:
        calls.append(1)
        result = estimate(*args, **kwargs)
        if len(calls) == 2:
            signal.raise_signal(signum)
        return result

    monkeypatch.setattr(api, "estimate_disparity", interrupted)
    # Python's own Ctrl-C handler, also when pytest was started with SIGINT ignored (as a
    # background job of a non-interactive shell is), where Ctrl-C could not reach a user either
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    out_dir = tmp_path / "out"
    try:
        got, out, err = _run(["stereo", str(left), str(right), "-o", str(out_dir), "--format",
                              "npy", *FAST], capsys)
    finally:
        signal.signal(signal.SIGINT, previous)
    assert got == code and len(calls) == 2
    assert out.startswith(f"wrote 1 pair(s) to {out_dir}; ")
    assert line is None or err.splitlines()[-1] == line
    assert sorted(p.name for p in out_dir.iterdir()) == [
        "a_disp.npy", "a_disp_color.png", "a_disp_noc.png"]


def test_skip_existing_skips_a_single_pair_that_is_there(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
        ) -> None:
    left, right = _write_pair(tmp_path / "in")
    out_dir = tmp_path / "out"
    args = ["stereo", str(left), str(right), "-o", str(out_dir), "--format", "npy", *FAST]
    assert _run(args, capsys)[0] == 0
    for path in out_dir.iterdir():  # marked: a recomputed file would not say this
        path.write_bytes(b"written before")
    monkeypatch.setattr(api, "load_model", lambda *a, **k: pytest.fail("the model loaded"))
    code, out, err = _run([*args, "--skip-existing"], capsys)
    assert code == 0 and err == ""
    assert out == f"wrote 0 pair(s) to {out_dir}, skipped 1 already there\n"
    assert {p.read_bytes() for p in out_dir.iterdir()} == {b"written before"}


@pytest.mark.parametrize("pairs", [1, 3])
def test_a_bad_memory_limit_is_one_error_before_any_pair(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch,
        pairs: int) -> None:
    monkeypatch.setenv("CROSSVIEW_MAX_MEMORY_GB", "lots")
    monkeypatch.setattr(api, "load_model", lambda *a, **k: pytest.fail("the model loaded"))
    if pairs == 1:
        left, right = _write_pair(tmp_path / "in")
    else:
        left, right = _folders(tmp_path, {n: (192, 200) for n in "abc"[:pairs]})
    code, out, err = _run(["stereo", str(left), str(right), "-o", str(tmp_path / "out"),
                           *FAST], capsys)
    assert code == 2 and out == ""
    assert err == ("error: $CROSSVIEW_MAX_MEMORY_GB must be a positive number of GiB, got "
                   "'lots'\n")
    assert not (tmp_path / "out").exists()


def _spoil(case: str, estimate):
    """``estimate`` whose result is spoiled as ``case`` says, as diverged weights would."""
    def spoiled(*args: object, **kwargs: object) -> api.StereoResult:
        if case == "diverged":
            raise NonFiniteError("rel_pos must be finite")
        result = estimate(*args, **kwargs)
        if case in ("nan at a valid pixel", "nan at an invalid pixel"):
            result.disparity[0, 5, 7] = float("nan")
            result.valid[0, 5, 7] = case == "nan at a valid pixel"
        else:
            result.confidence[0, 5, 7] = float("inf")
        return result
    return spoiled


@pytest.mark.parametrize("case,message", [
    ("nan at a valid pixel", "model cli-test-stereo gave non-finite disparity at valid pixels "
                             "(1 of "),
    ("diverged", "model cli-test-stereo gave non-finite fields (NaN or infinity)"),
    ("inf confidence", "model cli-test-stereo gave a non-finite confidence (1 of 38400 "
                       "values)"),
], ids=["nan disparity", "diverged", "inf confidence"])
def test_a_non_finite_result_fails_the_pair_and_writes_nothing(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch,
        case: str, message: str) -> None:
    monkeypatch.setattr(api, "estimate_disparity", _spoil(case, api.estimate_disparity))
    left, right = _write_pair(tmp_path / "in")
    out_dir = tmp_path / "out"
    code, out, err = _run(["stereo", str(left), str(right), "-o", str(out_dir), "--format",
                           "npy", "--save-confidence", *FAST], capsys)
    lines = [line for line in err.splitlines() if not line.startswith("warning:")]
    assert code == 2 and out == "" and len(lines) == 1, err
    assert lines[0].startswith(f"error: {left} and {right}: {message}"), err
    assert lines[0].endswith("(no output written)"), err
    assert not out_dir.exists()


def test_a_non_finite_disparity_where_it_is_not_valid_is_written(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
        ) -> None:
    monkeypatch.setattr(api, "estimate_disparity",
                        _spoil("nan at an invalid pixel", api.estimate_disparity))
    left, right = _write_pair(tmp_path / "in")
    code, _, err = _run(["stereo", str(left), str(right), "-o", str(tmp_path / "out"),
                         "--format", "npy", *FAST], capsys)
    assert code == 0, err
    assert np.isnan(io.read_npy(tmp_path / "out" / "scene_l_disp.npy")[5, 7])


@pytest.mark.parametrize("taken", ["scene_l_disp.pfm", "scene_l_disp_color.png",
                                   "scene_l_disp_right_noc.png", "scene_l_disp_rpos.png"])
def test_an_output_name_taken_by_a_directory_fails_before_the_model_loads(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch,
        taken: str) -> None:
    monkeypatch.setattr(api, "load_model", lambda *a, **k: pytest.fail("the model loaded"))
    left, right = _write_pair(tmp_path / "in")
    (tmp_path / "out" / taken).mkdir(parents=True)
    code, out, err = _run(["stereo", str(left), str(right), "-o", str(tmp_path / "out"),
                           "--save-right", "--save-rpos", *FAST], capsys)
    assert code == 2 and out == ""
    assert err == (f"error: {tmp_path / 'out' / taken}: is a directory; cannot write an output "
                   "file of that name\n")
    assert [p.name for p in (tmp_path / "out").iterdir()] == [taken]


def test_subprocess_exit_code_and_no_traceback(tmp_path: Path) -> None:
    left, _ = _write_pair(tmp_path)
    result = subprocess.run([sys.executable, "-m", "crossview", "stereo", str(left),
                             str(tmp_path / "missing.png"), "-o", str(tmp_path / "out")],
                            capture_output=True, text=True, timeout=HANG_GUARD_SECONDS)
    assert result.returncode == 2
    assert result.stderr.strip().startswith("error: ") and "Traceback" not in result.stderr


def test_each_image_is_read_once_and_the_model_looked_up_once(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
        ) -> None:
    from crossview.models import registry

    reads: list[str] = []
    lookups: list[str] = []
    read_image, get_spec = api.read_image, registry.get_spec
    monkeypatch.setattr(api, "read_image", lambda path: reads.append(Path(path).name)
                        or read_image(path))
    monkeypatch.setattr(registry, "get_spec", lambda name: lookups.append(name)
                        or get_spec(name))
    left, right = _write_pair(tmp_path / "in")
    code, _, err = _run(["stereo", str(left), str(right), "-o", str(tmp_path / "out"), *FAST],
                        capsys)
    assert code == 0, err
    assert sorted(reads) == ["scene_l.png", "scene_r.png"]
    assert lookups == ["cli-test-stereo"]


@pytest.mark.parametrize(("state", "hint"), [
    (lambda: api.build_model("matchstereo-mini").state_dict(),
     "; they fit the registered model matchstereo-mini: choose it (--model matchstereo-mini)"),
    (lambda: {"weight": torch.zeros(2, 3)}, "; they fit no registered stereo model"),
], ids=["another-model", "no-model"])
def test_weights_for_another_model_name_the_models_they_fit(
        tmp_path: Path, capsys: pytest.CaptureFixture[str],
        state: Callable[[], dict[str, torch.Tensor]], hint: str) -> None:
    """``--weights FILE`` without the ``--model`` it belongs to (the default model runs): the
    error says which registered model the file fits, not only hundreds of mismatches."""
    left, right = _write_pair(tmp_path / "in")
    weights = tmp_path / "w.pth"
    torch.save({"model": state()}, weights)
    code, out, err = _run(["stereo", str(left), str(right), "-o", str(tmp_path / "out"),
                           "--weights", str(weights)], capsys)
    assert code == 2 and out == "" and err.count("\n") == 1, err
    assert err.startswith(f"error: {weights} do not fit MatchStereo: ") and err.endswith(
        f"{hint}\n"), err
    assert not (tmp_path / "out").exists()
