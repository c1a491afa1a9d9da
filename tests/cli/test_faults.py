"""Bad input and faults, tried through the command line as a user meets them: pairs too small
for any matcher, a full disk (a real file-size limit, ``ulimit -f``, and ENOSPC), a rerun of
``stereo --rectify`` stopped by Ctrl-C, a swapped pair, rows offset by a sixth of the image,
options that would do nothing, and photographs whose EXIF orientation says to turn them. Each
is one ``error:`` line and exit code 2 with nothing half-written, or a run that says what is
wrong with the pair."""

from __future__ import annotations

import errno
import logging
import os
import resource
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

from cli_runner import run_cli
from crossview import api
from crossview.data import io
from hang_guard import HANG_GUARD_SECONDS

DISPARITY = 6  # px, of the textured pairs below


def _texture(h: int, w: int, seed: int = 0) -> np.ndarray:
    """A smooth random colour texture ``[h, w, 3]`` uint8 (features at a 4 px scale)."""
    coarse = np.random.default_rng(seed).integers(0, 256, (h // 4 + 2, w // 4 + 2, 3), np.uint8)
    return np.asarray(Image.fromarray(coarse).resize((4 * coarse.shape[1], 4 * coarse.shape[0]),
                                                     Image.BICUBIC))[:h, :w].copy()


def _pair(folder: Path, h: int = 128, w: int = 192, *, rows: int = 0) -> tuple[Path, Path]:
    """``folder/l.png, folder/r.png``: a rectified pair at :data:`DISPARITY`, the right image's
    content ``rows`` px lower than the left's (edge rows repeated)."""
    wide = _texture(h, w + DISPARITY)
    left, right = wide[:, :w], wide[:, DISPARITY:]
    if rows:
        right = np.concatenate([np.repeat(right[:1], rows, 0), right[:-rows]])
    folder.mkdir(parents=True, exist_ok=True)
    io.write_image(folder / "l.png", np.ascontiguousarray(left))
    io.write_image(folder / "r.png", np.ascontiguousarray(right))
    return folder / "l.png", folder / "r.png"


def _crossview(args: list[str], *, file_size_limit: int | None = None
               ) -> subprocess.CompletedProcess[str]:
    """``crossview ARGS`` in a process of its own (a crash there cannot end the tests), under
    a file-size limit in bytes (``ulimit -f``) if given."""
    def limit() -> None:
        if file_size_limit is not None:
            resource.setrlimit(resource.RLIMIT_FSIZE, (file_size_limit, file_size_limit))

    return subprocess.run([sys.executable, "-m", "crossview", *args], capture_output=True,
                          text=True, timeout=HANG_GUARD_SECONDS, preexec_fn=limit)


def _files(folder: Path) -> dict[str, bytes]:
    """Every file under ``folder`` (hidden staging names included) and its contents."""
    return {str(p.relative_to(folder)): p.read_bytes() for p in sorted(folder.rglob("*"))
            if p.is_file()}


@pytest.mark.parametrize("shape", [(1, 1), (8, 40), (40, 8), (11, 300)])
def test_a_pair_too_small_for_any_matcher_is_refused(tmp_path: Path,
                                                     shape: tuple[int, int]) -> None:
    """Before the fix, OpenCV's DIS (the row-offset check) ran first: a traceback, or a
    segmentation fault for 8x40."""
    image = np.random.default_rng(0).integers(0, 256, (*shape, 3), np.uint8)
    io.write_image(tmp_path / "l.png", image)
    io.write_image(tmp_path / "r.png", image)
    done = _crossview(["stereo", str(tmp_path / "l.png"), str(tmp_path / "r.png"), "-o",
                       str(tmp_path / "out")])
    assert done.returncode == 2, done.stderr
    assert done.stderr.startswith("error: ") and len(done.stderr.splitlines()) == 1
    assert "too small" in done.stderr and not (tmp_path / "out").exists()


@pytest.mark.parametrize("command", ["stereo", "rectify", "stereo --rectify", "export onnx"])
def test_a_file_size_limit_is_one_line_and_nothing_half_written(tmp_path: Path,
                                                                command: str) -> None:
    """The storage refuses the outputs (EFBIG under ``ulimit -f``, as ENOSPC on a full disk):
    one ``error:`` line, exit 2, and the output folder as it was."""
    left, right = _pair(tmp_path / "in", 160, 224)
    out = tmp_path / "out"
    out.mkdir()
    (out / "kept.txt").write_text("an earlier file\n")
    args = {"stereo": ["stereo", str(left), str(right), "-o", str(out)],
            "rectify": ["rectify", str(left), str(right), "-o", str(out)],
            "stereo --rectify": ["stereo", str(left), str(right), "-o", str(out), "--rectify"],
            "export onnx": ["export", "onnx", "--model", "matchstereo-mini", "--size",
                            "128x160", "-o", str(out / "mini.onnx"), "--no-check"]}[command]
    done = _crossview(args, file_size_limit=16_000)
    assert done.returncode == 2, done.stderr
    errors = [line for line in done.stderr.splitlines() if not line.startswith("note: ")]
    assert len(errors) == 1 and errors[0].startswith("error: a file grew past the file-size "
                                                     "limit"), done.stderr
    assert _files(out) == {"kept.txt": b"an earlier file\n"}


def test_a_full_disk_stops_a_batch_with_one_error_line(tmp_path: Path,
                                                       capsys: pytest.CaptureFixture,
                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    """ENOSPC on the first pair of a folder: every later pair would fail the same way, so the
    run stops at once, publishes nothing of the pair and says why in one line."""
    for name in ("a", "b"):
        left, right = _pair(tmp_path / name)
        for side, image in (("left", left), ("right", right)):
            (tmp_path / side).mkdir(exist_ok=True)
            os.replace(image, tmp_path / side / f"{name}.png")

    def full(path: Path, *args: object) -> None:
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), str(path))

    monkeypatch.setattr(api, "write_pfm", full)
    code, out, err = run_cli(["stereo", str(tmp_path / "left"), str(tmp_path / "right"), "-o",
                              str(tmp_path / "out"), "--model", "matchstereo-mini"], capsys)
    assert code == 2
    assert err.splitlines() == [f"error: no space left on the device writing into "
                                f"{tmp_path / 'out'}; the outputs being written were discarded "
                                "(free some space, or write elsewhere)"]
    assert "wrote 0 pair(s)" in out and "stopped: the storage is full" in out
    assert not (tmp_path / "out").exists() or _files(tmp_path / "out") == {}


def test_ctrl_c_in_a_rerun_of_stereo_rectify_keeps_the_earlier_run(
        tmp_path: Path, capsys: pytest.CaptureFixture,
        monkeypatch: pytest.MonkeyPatch) -> None:
    """The rectified pair is published with the disparity files: an interrupted rerun into the
    same folder leaves the first run's files, all of them, as they were (before the fix it
    deleted the first run's rectified pair and kept its disparity files)."""
    left, right = _pair(tmp_path / "in", 160, 224)
    out = tmp_path / "out"
    args = ["stereo", str(left), str(right), "-o", str(out), "--rectify", "--model",
            "matchstereo-mini"]
    code, _, err = run_cli(args, capsys)
    assert code == 0, err
    first = _files(out)
    assert {"l_rectified/left.png", "l_rectified/right.png", "l_rectified/rectification.json",
            "l_disp.pfm"} <= set(first)

    def interrupted(*args: object, **kwargs: object) -> None:
        raise KeyboardInterrupt

    monkeypatch.setattr(api, "estimate_disparity", interrupted)
    code, _, _ = run_cli(args, capsys)
    assert code != 0
    assert _files(out) == first


def test_a_swapped_pair_is_pointed_out(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    left, right = _pair(tmp_path)
    code, _, err = run_cli(["stereo", str(right), str(left), "-o", str(tmp_path / "swapped")],
                           capsys)
    assert code == 0, err
    assert "the left and right images look swapped; give the left image first" in err
    code, _, err = run_cli(["stereo", str(left), str(right), "-o", str(tmp_path / "out")],
                           capsys)
    assert code == 0 and "swapped" not in err, err


def test_a_pair_kept_as_it_is_by_rectify_is_checked_for_its_order(
        tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    left, right = _pair(tmp_path, 240, 320)
    code, _, err = run_cli(["rectify", str(right), str(left), "-o", str(tmp_path / "out")],
                           capsys)
    assert code == 0, err
    assert "look swapped" in err


def test_a_swapped_pair_given_to_stereo_rectify_is_warned_about_once(
        tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    """The rectification's matches find the order, and the run on the rectified pair would
    again: one warning."""
    left, right = _pair(tmp_path, 240, 320)
    code, _, err = run_cli(["stereo", str(right), str(left), "--rectify", "--format", "npy",
                            "-o", str(tmp_path / "out")], capsys)
    assert code == 0, err
    assert err.count("look swapped") == 1, err
    assert logging.getLogger("crossview.geometry.pair_order").filters == []


def test_rows_offset_by_a_sixth_of_the_image_are_measured_and_pointed_to_rectify(
        tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    """20 rows of a 128-row pair of fine texture (before the fix: measured as about 1 px)."""
    left, right = _pair(tmp_path, 128, 192, rows=20)
    code, _, err = run_cli(["stereo", str(left), str(right), "-o", str(tmp_path / "out"),
                            "--format", "npy"], capsys)
    assert code == 0, err
    assert "the right image's rows lie 20.0 px below the left's" in err
    assert "--rectify" in err
    disparity = np.load(tmp_path / "out" / "l_disp.npy")[24:-8, 24:-24]
    assert np.mean(np.abs(disparity - DISPARITY) < 1) > 0.9


def test_static_without_bare_is_refused(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    code, out, err = run_cli(["export", "onnx", "--model", "matchstereo-mini", "--size",
                              "128x160", "-o", str(tmp_path / "m.onnx"), "--static"], capsys)
    assert (code, out) == (2, "")
    assert err.splitlines() == ["error: --static fixes the size of a --bare export; without "
                                "--bare the file already takes only --size (add --bare, or "
                                "drop --static)"]
    assert not list(tmp_path.iterdir())


def test_exif_orientation_is_applied(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    """A phone stores a portrait photograph sideways with an EXIF orientation; the pair is
    matched upright, as viewers show it (before the fix: sideways, rows for columns)."""
    left, right = (io.read_image(p) for p in _pair(tmp_path / "upright", 256, 160))
    for name, image in (("l", left), ("r", right)):
        stored = Image.fromarray(np.rot90(image, k=1))  # turned left: display turns it right
        exif = stored.getexif()
        exif[0x0112] = 6  # "rotate 90 degrees clockwise to display"
        stored.save(tmp_path / f"{name}.png", exif=exif)
    assert np.array_equal(io.read_image(tmp_path / "l.png"), left)
    code, _, err = run_cli(["stereo", str(tmp_path / "l.png"), str(tmp_path / "r.png"), "-o",
                            str(tmp_path / "out"), "--format", "npy"], capsys)
    assert code == 0, err
    disparity = np.load(tmp_path / "out" / "l_disp.npy")
    assert disparity.shape == (256, 160)
    assert np.median(disparity[16:-16, 16:-16]) == pytest.approx(DISPARITY, abs=0.5)
