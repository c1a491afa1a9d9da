from __future__ import annotations

import csv
import json
from pathlib import Path

import numpy as np
import pytest
import torch
from PIL import Image
from safetensors.torch import save_file

from crossview import api
from crossview.cli.app import main
from crossview.cli.match import parse_points
from crossview.errors import UserError
from crossview.models.transformatcher.model import TransforMatcher


@pytest.fixture(scope="module")
def files(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("match")
    rng = np.random.default_rng(0)
    Image.fromarray(rng.integers(0, 256, (48, 64, 3), dtype=np.uint8)).save(root / "src.png")
    Image.fromarray(rng.integers(0, 256, (40, 36, 3), dtype=np.uint8)).save(root / "tgt.png")
    torch.manual_seed(0)
    model = TransforMatcher()
    torch.nn.init.normal_(model.refiner.head.weight, std=0.1)
    save_file(model.head_state_dict(), str(root / "w.safetensors"))
    return {"root": root, "src": root / "src.png", "tgt": root / "tgt.png",
            "weights": root / "w.safetensors"}


def _run(args: list[str]) -> int:
    with pytest.raises(SystemExit) as done:
        main(args)
    return done.value.code


def test_match_writes_json_csv_and_pictures(files, capsys) -> None:
    out = files["root"] / "out"
    code = _run(["match", str(files["src"]), str(files["tgt"]), "--points", "3,4; 60.5,40",
                 "-o", str(out), "--weights", str(files["weights"])])
    assert code in (0, None)
    payload = json.loads((out / "matches.json").read_text())
    assert [p["src"] for p in payload["points"]] == [[3.0, 4.0], [60.5, 40.0]]
    for p in payload["points"]:  # transferred points lie in the target frame
        assert -0.5 <= p["tgt"][0] <= 35.5 and -0.5 <= p["tgt"][1] <= 39.5
    rows = list(csv.DictReader((out / "matches.csv").open()))
    assert len(rows) == 2 and float(rows[1]["src_x"]) == 60.5
    assert float(rows[0]["tgt_x"]) == pytest.approx(payload["points"][0]["tgt"][0], abs=1e-3)
    side = np.asarray(Image.open(out / "matches.png"))
    assert side.shape[0] == 48 and side.shape[1] > 64
    assert np.asarray(Image.open(out / "warped.png")).shape == (40, 36, 3)
    assert sorted(p.name for p in out.iterdir()) == ["matches.csv", "matches.json",
                                                     "matches.png", "warped.png"]


@pytest.mark.parametrize(("extra", "message"), [
    (["--points", "1,2;abc"], "cannot read point 'abc'"),
    (["--points", "100,2"], "outside the source image"),
    (["--points", "1,2", "--points-file", "p.txt"], "either --points or --points-file"),
    (["--points-file", "missing.txt"], "no such points file"),
    (["--points-file", "{root}/binary.txt"], "binary.txt: not a text file (expected one x,y"),
    (["--points", "1e999,2"], "point (inf, 2) is not finite"),
    (["--device", "meta"], "--device 'meta': device type 'meta' holds no data"),
    (["--device", "foo"], "--device 'foo' is not a device name"),
    (["--model", "matchstereo-mini"], "--model 'matchstereo-mini' estimates stereo; crossview "
                                      "match needs a semantic model: transformatcher, "
                                      "transformatcher-lite0-lite2"),
    (["--model", "sift"], "unknown model 'sift'"),
])
def test_bad_input_is_one_line_exit_2_and_no_output(files, capsys, extra, message) -> None:
    (files["root"] / "binary.txt").write_bytes(bytes(range(256)))
    extra = [arg.format(root=files["root"]) for arg in extra]
    out = files["root"] / "bad"
    code = _run(["match", str(files["src"]), str(files["tgt"]), *extra, "-o", str(out),
                 "--weights", str(files["weights"])])
    err = capsys.readouterr().err.strip()
    assert code == 2
    assert message in err and len(err.splitlines()) == 1 and "Traceback" not in err
    assert not out.exists()


@pytest.mark.parametrize("where", ["/proc/crossview-match", "blocker/out"])
def test_an_unwritable_output_directory_fails_before_matching(files, capsys, where) -> None:
    (files["root"] / "blocker").write_text("a file, not a directory")
    out = where if where.startswith("/") else str(files["root"] / where)
    code = _run(["match", str(files["src"]), str(files["tgt"]), "-o", out,
                 "--weights", str(files["weights"])])
    err = capsys.readouterr().err.strip()
    assert code == 2 and err.startswith("error: ") and len(err.splitlines()) == 1, err


@pytest.mark.parametrize("taken", ["matches.json", "matches.csv", "matches.png", "warped.png"])
def test_an_output_name_taken_by_a_directory_fails_before_matching(
        files, capsys, monkeypatch, tmp_path, taken) -> None:
    monkeypatch.setattr(api, "match_keypoints", lambda *a, **k: pytest.fail("matched"))
    (tmp_path / taken).mkdir()
    code = _run(["match", str(files["src"]), str(files["tgt"]), "-o", str(tmp_path),
                 "--weights", str(files["weights"])])
    err = capsys.readouterr().err
    assert code == 2 and err == (f"error: {tmp_path / taken}: is a directory; cannot write an "
                                 "output file of that name\n")
    assert [p.name for p in tmp_path.iterdir()] == [taken]  # nothing written


def test_unreadable_weights_are_one_line(files, capsys) -> None:
    notes = files["root"] / "notes.pth"
    notes.write_text("hello world\n")  # torch.load raises KeyError on this text
    code = _run(["match", str(files["src"]), str(files["tgt"]), "-o",
                 str(files["root"] / "bad3"), "--weights", str(notes)])
    err = capsys.readouterr().err.strip()
    assert code == 2 and "notes.pth: cannot read weights" in err and len(err.splitlines()) == 1
    assert not (files["root"] / "bad3").exists()


def test_missing_image_is_a_user_error(files, capsys) -> None:
    code = _run(["match", str(files["root"] / "nope.png"), str(files["tgt"]),
                 "-o", str(files["root"] / "bad2"), "--weights", str(files["weights"])])
    assert code == 2 and "nope.png" in capsys.readouterr().err


def test_parse_points_forms() -> None:
    np.testing.assert_array_equal(parse_points("1,2;3.5 , -4e1", "x"), [[1, 2], [3.5, -40]])
    np.testing.assert_array_equal(parse_points("# header\n1 2\n\n5,6 # eye\n", "f"),
                                  [[1, 2], [5, 6]])
    with pytest.raises(UserError, match="no points"):
        parse_points(" ; ", "--points")
