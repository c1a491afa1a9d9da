"""``crossview export onnx`` bad input: one line on stderr, exit code 2, nothing written, and
no export started (each fails in well under a second)."""

from __future__ import annotations

from pathlib import Path

import pytest

from crossview.cli.app import main
from crossview.export import onnx

CASES = {
    "bare, not a multiple of 32": (["--model", "matchstereo-mini", "--size", "200x256",
                                    "--bare"],
                                   "--size 200x256: the bare matchstereo-mini needs sides that "
                                   "are multiples of 32 (no padding inside), e.g. 224x256"),
    "bare with refinement": (["--model", "matchstereo-hybrid", "--size", "192x192", "--bare",
                              "--refine"], "--bare exports the network alone: no --lri, no "
                                           "--refine"),
    "refinement of a matcher": (["--model", "transformatcher", "--size", "240x240",
                                 "--no-refine"], "--bare, --lri, --refine, --fuse and --preset "
                                                 "are MatchStereo / MatchFlow options"),
    "preset of the network alone": (["--model", "matchstereo-hybrid", "--size", "192x192",
                                     "--no-fuse", "--preset", "fast"],
                                    "--preset sets the fused run"),
    "fused flow": (["--model", "matchflow-hybrid", "--size", "192x192", "--fuse"],
                   "only stereo files are fused"),
    "unknown preset": (["--model", "matchstereo-hybrid", "--size", "192x192", "--preset",
                        "slow"], "unknown preset 'slow'"),
    "below the minimum": (["--model", "matchflow-mini", "--size", "64x64"],
                          "--size 64x64: matchflow-mini needs at least"),
    "unknown model": (["--model", "nope", "--size", "192x192"], "unknown model 'nope'"),
    "transformatcher size": (["--model", "transformatcher", "--size", "256x256"],
                             "--size 256x256: transformatcher takes only 240x240 images"),
    "not exportable": (["--model", "multiview", "--size", "64x64"],
                       "cannot be exported to ONNX"),
    "size text": (["--model", "matchstereo-mini", "--size", "big"], "HxW"),
    "size beyond memory": (["--model", "matchstereo-mini", "--size", "100000x100000"],
                           "matchstereo-mini at 100000x100000 px needs about "),
}


@pytest.mark.parametrize("case", list(CASES))
def test_bad_input_is_one_line_exit_2_nothing_written(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch,
        case: str) -> None:
    monkeypatch.setattr(onnx, "export_onnx",
                        lambda *a, **k: pytest.fail("the export started"))
    args, message = CASES[case]
    out = tmp_path / "out" / "m.onnx"
    with pytest.raises(SystemExit) as done:
        main(["export", "onnx", *args, "-o", str(out)])
    err = capsys.readouterr().err
    lines = [line for line in err.splitlines() if not line.startswith("warning:")]
    assert done.value.code == 2
    assert len(lines) == 1 and lines[0].startswith("error: ") and message in lines[0], err
    assert not (tmp_path / "out").exists()
