"""``crossview weights ...`` and ``--download``: the cache from the command line, one line and
exit code 2 for every refusal, the network touched only when asked."""

from __future__ import annotations

import hashlib
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest
import torch
from PIL import Image

import weights_server as hosted
from crossview.cli.app import main
from weights_server import TEST_FILE, TEST_MODEL, Answer, WeightsServer


@pytest.fixture
def server(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[WeightsServer]:
    monkeypatch.setenv("CROSSVIEW_HOME", str(tmp_path / "home"))
    with hosted.weights_server() as running:
        hosted.publish_test_model(running, monkeypatch)
        body = hosted.checkpoint_bytes(hosted.random_state_dict())
        running.routes[f"/{TEST_FILE}"] = Answer(body)
        yield running


@pytest.fixture
def cached(tmp_path: Path) -> Path:
    return tmp_path / "home" / "weights" / TEST_FILE


def _run(args: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    with pytest.raises(SystemExit) as done:
        main(args)
    captured = capsys.readouterr()
    return done.value.code, captured.out, captured.err


def _pair(folder: Path) -> list[str]:
    rng = np.random.default_rng(0)
    image = rng.integers(0, 256, (192, 192, 3), dtype=np.uint8)
    folder.mkdir(parents=True)
    Image.fromarray(image).save(folder / "l.png")
    Image.fromarray(np.roll(image, -2, axis=1)).save(folder / "r.png")
    return [str(folder / "l.png"), str(folder / "r.png")]


def test_download_then_list_verify_and_path(server: WeightsServer, cached: Path,
                                            capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = _run(["weights", "download", TEST_MODEL], capsys)
    assert (code, out) == (0, f"{TEST_MODEL}: {cached}\n"), err
    digest = hashlib.sha256(cached.read_bytes()).hexdigest()
    assert err.splitlines() == [  # said before the transfer starts, and when it is done
        f"note: downloading {server.url(TEST_FILE)} to {cached}",
        f"note: downloaded {server.url(TEST_FILE)} to {cached} (SHA-256 {digest})"]
    code, out, _ = _run(["weights", "download", TEST_MODEL], capsys)  # there already
    assert code == 0 and server.asked == [f"/{TEST_FILE}"]
    code, out, _ = _run(["weights", "verify"], capsys)
    assert (code, out) == (0, f"ok {TEST_MODEL}: {cached}\n")
    code, out, _ = _run(["weights", "list"], capsys)
    assert code == 0 and TEST_FILE in out and "matchstereo_base_fsd.pth" in out
    assert "recorded" in out and "not recorded" not in out
    assert f"{cached.stat().st_size / 1e6:.1f} MB" in out
    code, out, _ = _run(["weights", "path", "matchstereo-b"], capsys)
    assert (code, out) == (0, f"{cached.parent / 'matchstereo_base_fsd.pth'}\n")


def test_verify_removes_a_damaged_file(server: WeightsServer, cached: Path,
                                       capsys: pytest.CaptureFixture[str]) -> None:
    assert _run(["weights", "download", TEST_MODEL], capsys)[0] == 0
    damaged = bytearray(cached.read_bytes())
    damaged[100] ^= 0xFF
    cached.write_bytes(bytes(damaged))
    code, out, err = _run(["weights", "verify", TEST_MODEL], capsys)
    assert code == 2 and out == "" and err.count("\n") == 1
    assert err.startswith(f"error: {cached}: SHA-256 ") and "was removed" in err
    assert not cached.exists()


@pytest.mark.parametrize("args,message", [
    (["weights", "download", "matchstereo-x"], "error: no published weights named "
     "'matchstereo-x'; choose one of: matchflow-b, matchstereo-b, matchstereo-s, matchstereo-t"),
    (["weights", "path", "matchstereo-hybrid"], "error: no published weights named "
     "'matchstereo-hybrid'; choose one of: "),
    (["weights", "verify", "transformatcher"], "error: no published weights named "
     "'transformatcher'; choose one of: "),
])
def test_unknown_names_are_one_line(server: WeightsServer, capsys: pytest.CaptureFixture[str],
                                    args: list[str], message: str) -> None:
    code, out, err = _run(args, capsys)
    assert code == 2 and out == "" and err.count("\n") == 1 and err.startswith(message), err
    assert server.asked == []


def test_a_web_page_instead_of_the_checkpoint_is_one_line_and_writes_nothing(
        server: WeightsServer, cached: Path, capsys: pytest.CaptureFixture[str]) -> None:
    server.routes[f"/{TEST_FILE}"] = Answer(b"<html>Too many requests</html>",
                                            content_type="text/html")
    code, out, err = _run(["weights", "download", TEST_MODEL], capsys)
    assert code == 2 and out == "" and err.count("\n") == 1
    assert err == (f"error: {server.url(TEST_FILE)} answered with a web page (text/html), not a "
                   "PyTorch checkpoint; nothing written\n")
    assert list(cached.parent.iterdir()) == []


def test_stereo_downloads_only_with_download(server: WeightsServer, cached: Path,
                                             tmp_path: Path,
                                             capsys: pytest.CaptureFixture[str]) -> None:
    pair = _pair(tmp_path / "in")
    out_dir = tmp_path / "out"
    code, _, err = _run(["stereo", *pair, "-o", str(out_dir), "--model", TEST_MODEL], capsys)
    assert code == 2 and err.count("\n") == 1 and server.asked == []
    assert f"run `crossview weights download {TEST_MODEL}` (or pass --download)" in err
    assert f"download {server.url(TEST_FILE)} by hand and put it at {cached}" in err
    assert not out_dir.exists()
    code, out, err = _run(["stereo", *pair, "-o", str(out_dir), "--model", TEST_MODEL,
                           "--download"], capsys)
    assert code == 0 and "wrote 1 pair" in out, err
    assert cached.is_file() and (out_dir / "l_disp.pfm").is_file()
    assert "meaningless" not in err  # the published weights, not random ones


def test_offline_download_is_one_line(server: WeightsServer, cached: Path,
                                      monkeypatch: pytest.MonkeyPatch,
                                      capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setenv("CROSSVIEW_OFFLINE", "1")
    code, out, err = _run(["weights", "download", TEST_MODEL], capsys)
    assert code == 2 and out == "" and server.asked == []
    assert err == (f"error: {TEST_MODEL}: CROSSVIEW_OFFLINE is set, so crossview does not "
                   f"download {TEST_FILE}; download {server.url(TEST_FILE)} by hand and put it "
                   f"at {cached}\n")


def test_eval_downloads_only_with_download(server: WeightsServer, cached: Path,
                                           capsys: pytest.CaptureFixture[str]) -> None:
    args = ["eval", "--model", TEST_MODEL, "--dataset", "synthetic-stereo,size=192x192",
            "--limit", "1", "--no-per-sample"]
    code, out, err = _run(args, capsys)
    assert code == 2 and out == "" and err.count("\n") == 1 and server.asked == []
    assert "(or pass --download)" in err
    code, out, err = _run([*args, "--download"], capsys)
    assert code == 0 and "epe" in out, err
    assert cached.is_file() and server.asked == [f"/{TEST_FILE}"]


def _placed_by_hand(cached: Path, body: bytes) -> None:
    cached.parent.mkdir(parents=True, exist_ok=True)
    cached.write_bytes(body)


def test_a_file_that_never_loaded_is_not_trusted(server: WeightsServer, cached: Path,
                                                 tmp_path: Path,
                                                 capsys: pytest.CaptureFixture[str]) -> None:
    """Trust on first use records a digest only for a file that loaded as the model's
    checkpoint: a wrong file put in place by hand is refused and left unrecorded, so the right
    file copied in afterwards is accepted (and not removed as damaged)."""
    record = cached.with_name(f"{TEST_FILE}.sha256")
    _placed_by_hand(cached, hosted.checkpoint_bytes({"weight": torch.zeros(2, 3)}))
    pair, out_dir = _pair(tmp_path / "in"), tmp_path / "out"
    code, out, err = _run(["stereo", *pair, "-o", str(out_dir), "--model", TEST_MODEL], capsys)
    assert code == 2 and out == "" and err.count("\n") == 1, err
    assert err.startswith(f"error: {TEST_MODEL}: {TEST_FILE} in the cache is not its "
                          "checkpoint ("), err
    assert "unexpected keys (1): weight" in err and "; nothing recorded: " in err
    assert not record.exists() and not out_dir.exists()
    code, out, err = _run(["weights", "verify"], capsys)
    assert code == 2 and "ok" not in out and "is not its checkpoint" in err, (out, err)
    code, out, _ = _run(["weights", "list"], capsys)
    assert code == 0 and "not recorded" in out, out
    good = hosted.checkpoint_bytes(hosted.random_state_dict())
    cached.write_bytes(good)  # the right file, copied in by hand
    code, out, err = _run(["weights", "verify"], capsys)
    assert (code, out) == (0, f"ok {TEST_MODEL}: {cached}\n"), err
    assert cached.read_bytes() == good
    assert record.read_text() == f"{hashlib.sha256(good).hexdigest()}  {TEST_FILE}\n"
    assert server.asked == []


def test_a_damaged_record_is_an_error_and_is_never_rewritten(
        server: WeightsServer, cached: Path, tmp_path: Path,
        capsys: pytest.CaptureFixture[str]) -> None:
    """A flipped byte in the checkpoint and one in its record: the record is not silently
    replaced by the damaged file's digest (which would load the altered weights)."""
    assert _run(["weights", "download", TEST_MODEL], capsys)[0] == 0
    record = cached.with_name(f"{TEST_FILE}.sha256")
    damaged = bytearray(cached.read_bytes())
    damaged[-100] ^= 0xFF
    cached.write_bytes(bytes(damaged))
    text = bytearray(record.read_bytes())
    text[10] ^= 0xFF
    record.write_bytes(bytes(text))
    pair, out_dir = _pair(tmp_path / "in"), tmp_path / "out"
    for args in (["stereo", *pair, "-o", str(out_dir), "--model", TEST_MODEL],
                 ["weights", "verify", TEST_MODEL], ["weights", "download", TEST_MODEL]):
        code, out, err = _run(args, capsys)
        assert code == 2 and out == "" and err.count("\n") == 1, (args, out, err)
        assert err.startswith(f"error: {record}: not a SHA-256 record of {TEST_FILE} ("), err
        assert f"crossview weights download {TEST_MODEL}" in err, err
        assert record.read_bytes() == bytes(text) and cached.read_bytes() == bytes(damaged)
    code, out, _ = _run(["weights", "list"], capsys)
    assert code == 0 and "damaged record" in out, out
    assert not out_dir.exists() and server.asked == [f"/{TEST_FILE}"]


def test_a_record_that_is_a_directory_is_one_error(server: WeightsServer, cached: Path,
                                                   capsys: pytest.CaptureFixture[str]) -> None:
    assert _run(["weights", "download", TEST_MODEL], capsys)[0] == 0
    record = cached.with_name(f"{TEST_FILE}.sha256")
    record.unlink()
    record.mkdir()
    code, out, err = _run(["weights", "verify"], capsys)
    assert code == 2 and out == "" and err.count("\n") == 1, err
    assert err.startswith(f"error: {record}: not a SHA-256 record of {TEST_FILE} (it is a "
                          "directory)"), err
    assert record.is_dir() and cached.is_file()


def test_verify_loads_the_file_not_only_its_digest(server: WeightsServer, cached: Path,
                                                   capsys: pytest.CaptureFixture[str]) -> None:
    """A file whose digest matches its record but that does not load as the model's
    checkpoint (recorded by an older crossview, or the model changed) is not "ok"."""
    wrong = hosted.checkpoint_bytes({"weight": torch.zeros(2, 3)})
    _placed_by_hand(cached, wrong)
    cached.with_name(f"{TEST_FILE}.sha256").write_text(
        f"{hashlib.sha256(wrong).hexdigest()}  {TEST_FILE}\n")
    code, out, err = _run(["weights", "verify", TEST_MODEL], capsys)
    assert code == 2 and out == "" and err.count("\n") == 1, (out, err)
    assert err.startswith(f"error: {TEST_MODEL}: {TEST_FILE} in the cache is not its "
                          "checkpoint ("), err
    assert "unexpected keys (1): weight" in err
