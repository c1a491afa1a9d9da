"""Published weights by name: download on request only, SHA-256 recorded and checked, one-line
errors for every bad answer, nothing written unless the whole file arrived and fits the model.

The weights host is a local HTTP server on 127.0.0.1 (``weights_server``): no network.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import socket
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
import torch

from crossview import api
from crossview.errors import UserError
from crossview.models import published, registry
from crossview.models.published import PublishedWeights
from weights_server import (
    TEST_FILE,
    TEST_MODEL,
    Answer,
    WeightsServer,
    checkpoint_bytes,
    publish_test_model,
    random_state_dict,
    weights_server,
)

SHAPES = Path(__file__).resolve().parents[3] / "shared" / "golden" / \
    "official_state_dict_shapes.json"


@pytest.fixture
def server(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[WeightsServer]:
    monkeypatch.setenv("CROSSVIEW_HOME", str(tmp_path / "home"))
    with weights_server() as running:
        yield running


@pytest.fixture
def cached(tmp_path: Path) -> Path:
    """Where the test model's published file lands."""
    return tmp_path / "home" / "weights" / TEST_FILE


@pytest.fixture
def body(server: WeightsServer, monkeypatch: pytest.MonkeyPatch) -> bytes:
    """The test model registered, its checkpoint (with an extra entry, as published files
    have) served at its URL."""
    publish_test_model(server, monkeypatch)
    data = checkpoint_bytes(random_state_dict(), epoch=7)
    server.routes[f"/{TEST_FILE}"] = Answer(data)
    return data


def _left_in(directory: Path) -> list[str]:
    return sorted(p.name for p in directory.iterdir()) if directory.is_dir() else []


def test_a_download_is_recorded_and_later_loads_need_no_network(
        server: WeightsServer, body: bytes, cached: Path) -> None:
    model = api.load_model(TEST_MODEL, "published", download=True)
    assert cached.read_bytes() == body
    digest = hashlib.sha256(body).hexdigest()
    assert (cached.parent / f"{TEST_FILE}.sha256").read_text() == f"{digest}  {TEST_FILE}\n"
    assert _left_in(cached.parent) == [TEST_FILE, f"{TEST_FILE}.sha256"]  # no partial file
    assert model.weights_source == str(cached)
    expected = random_state_dict()
    assert all(torch.equal(value, expected[key]) for key, value in model.state_dict().items())
    server.routes.clear()
    again = api.load_model(TEST_MODEL)  # no weights given: the published ones, from the cache
    assert again.weights_source == str(cached)
    assert server.asked == [f"/{TEST_FILE}"]  # one download, however many loads


_HTML = b"<!DOCTYPE html><html><body>Sign in to continue</body></html>"


@pytest.mark.parametrize("answer,message", [
    (lambda data: Answer(data, cut_after=1000),
     r"the download of http://127\.0\.0\.1:\d+/test_published\.pth was interrupted after 1000 "
     r"of \d+ bytes; nothing kept, run it again"),
    (lambda data: Answer(b"gone", 404, "text/plain"),
     r"test_published\.pth: the server answered HTTP 404 Not Found; nothing written"),
    (lambda data: Answer(_HTML, content_type="text/html; charset=utf-8"),
     r"answered with a web page \(text/html\), not a PyTorch checkpoint; nothing written"),
    (lambda data: Answer(_HTML),  # a web page served as a binary file
     r"did not send a PyTorch checkpoint \(it starts with b'<!DO'\); nothing written"),
    (lambda data: Answer(b""), r"sent an empty answer, not a PyTorch checkpoint"),
    (lambda data: Answer(checkpoint_bytes({"weight": torch.zeros(2, 3)})),
     r"do not fit MatchStereo: missing keys \(\d+\): .*unexpected keys \(1\): weight"),
    (lambda data: Answer(checkpoint_bytes({k: v.fill_(float("nan"))
                                           for k, v in random_state_dict().items()})),
     r"holds NaN or infinite values"),
], ids=["interrupted", "404", "html", "html-as-binary", "empty", "another-model", "nan"])
def test_a_bad_answer_is_one_error_and_writes_nothing(
        server: WeightsServer, body: bytes, cached: Path,
        answer: Callable[[bytes], Answer], message: str) -> None:
    server.routes[f"/{TEST_FILE}"] = answer(body)
    with pytest.raises(UserError, match=message) as raised:
        api.load_model(TEST_MODEL, "published", download=True)
    assert "\n" not in str(raised.value)
    assert _left_in(cached.parent) == []  # no file, no partial download, no digest


def test_a_damaged_file_is_one_error_and_is_removed(body: bytes, cached: Path) -> None:
    api.load_model(TEST_MODEL, download=True)
    damaged = bytearray(body)
    damaged[len(body) // 2] ^= 0xFF
    cached.write_bytes(bytes(damaged))
    with pytest.raises(UserError, match=rf"{cached}: SHA-256 {hashlib.sha256(damaged).hexdigest()}"
                       rf" differs from {hashlib.sha256(body).hexdigest()}, recorded when it was "
                       r"first downloaded: the file is damaged and was removed; download it again"
                       rf" with `crossview weights download {TEST_MODEL}`"):
        api.load_model(TEST_MODEL)
    assert _left_in(cached.parent) == [f"{TEST_FILE}.sha256"]  # the record stays to check again
    api.load_model(TEST_MODEL, download=True)  # and the next download restores the file
    assert cached.read_bytes() == body


def test_a_download_that_differs_from_the_recorded_digest_is_refused(
        server: WeightsServer, body: bytes, cached: Path) -> None:
    api.load_model(TEST_MODEL, download=True)
    cached.unlink()
    other = checkpoint_bytes(random_state_dict(seed=1))
    server.routes[f"/{TEST_FILE}"] = Answer(other)
    with pytest.raises(UserError, match=rf"the downloaded file's SHA-256 "
                       rf"{hashlib.sha256(other).hexdigest()} differs from "
                       rf"{hashlib.sha256(body).hexdigest()}, recorded at its first download; "
                       r"nothing kept"):
        api.load_model(TEST_MODEL, download=True)
    assert _left_in(cached.parent) == [f"{TEST_FILE}.sha256"]


def test_without_download_a_missing_file_names_url_path_and_command(
        server: WeightsServer, body: bytes, cached: Path) -> None:
    with pytest.raises(UserError) as raised:
        api.load_model(TEST_MODEL)
    assert str(raised.value) == (
        f"{TEST_MODEL}: the published weights {TEST_FILE} are not downloaded (crossview "
        f"downloads only when asked): run `crossview weights download {TEST_MODEL}` (or pass "
        f"--download), or download {server.url(TEST_FILE)} by hand and put it at {cached}")
    assert server.asked == [] and not cached.parent.exists()


def test_offline_refuses_to_download_in_one_line(
        server: WeightsServer, body: bytes, cached: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CROSSVIEW_OFFLINE", "1")
    with pytest.raises(UserError) as raised:
        api.load_model(TEST_MODEL, download=True)
    assert str(raised.value) == (
        f"{TEST_MODEL}: CROSSVIEW_OFFLINE is set, so crossview does not download {TEST_FILE}; "
        f"download {server.url(TEST_FILE)} by hand and put it at {cached}")
    assert server.asked == []


def test_no_network_says_what_to_fetch_by_hand(
        server: WeightsServer, cached: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    with socket.socket() as probe:  # a port nobody listens on
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    url = f"http://127.0.0.1:{port}/{TEST_FILE}"
    publish_test_model(server, monkeypatch, url=url)
    with pytest.raises(UserError, match=rf"^{TEST_MODEL}: cannot reach 127\.0\.0\.1:{port} "
                       rf"\(.*\); download {url} by hand and put it at {cached}$"):
        api.load_model(TEST_MODEL, download=True)
    assert _left_in(cached.parent) == []


def test_a_file_put_in_place_by_hand_is_recorded_on_first_use(
        server: WeightsServer, body: bytes, cached: Path) -> None:
    cached.parent.mkdir(parents=True)
    cached.write_bytes(body)
    model = api.load_model(TEST_MODEL)
    assert model.weights_source == str(cached) and server.asked == []
    assert published.recorded_digest(cached, TEST_MODEL) == hashlib.sha256(body).hexdigest()


def test_a_file_put_in_place_by_hand_that_does_not_load_is_not_recorded(
        server: WeightsServer, body: bytes, cached: Path) -> None:
    cached.parent.mkdir(parents=True)
    cached.write_bytes(checkpoint_bytes({"weight": torch.zeros(2, 3)}))
    with pytest.raises(UserError, match=rf"^{TEST_MODEL}: {TEST_FILE} in the cache is not its "
                       r"checkpoint \(.*unexpected keys \(1\): weight.*\); nothing recorded: "):
        api.load_model(TEST_MODEL)
    assert _left_in(cached.parent) == [TEST_FILE]  # kept, for the user to look at
    cached.write_bytes(body)
    assert api.load_model(TEST_MODEL).weights_source == str(cached)
    assert published.recorded_digest(cached, TEST_MODEL) == hashlib.sha256(body).hexdigest()


@pytest.mark.parametrize("name,weights,message", [
    ("matchstereo-hybrid", "published", "matchstereo-hybrid has no published weights; models "
     "with published weights: matchflow-b, matchstereo-b, matchstereo-s, matchstereo-t"),
    ("matchstereo-x", "published", "unknown model 'matchstereo-x'; choose one of: "),
])
def test_unknown_model_or_weights_name(name: str, weights: str, message: str) -> None:
    with pytest.raises(UserError, match=f"^{message}"):
        api.load_model(name, weights)


def test_the_specs_name_the_authors_files() -> None:
    files = {name: registry.get_spec(name).published for name in registry.list_published()}
    base = "https://huggingface.co/Tingman/MatchAttention/resolve/main/"
    assert files == {
        name: PublishedWeights(file, base + file) for name, file in (
            ("matchstereo-t", "matchstereo_tiny_fsd.pth"),
            ("matchstereo-s", "matchstereo_small_fsd.pth"),
            ("matchstereo-b", "matchstereo_base_fsd.pth"),
            ("matchflow-b", "matchflow_base_sintel.pth"))}


def test_the_cache_lives_under_crossview_home(monkeypatch: pytest.MonkeyPatch,
                                              tmp_path: Path) -> None:
    weights = registry.get_spec("matchstereo-b").published
    monkeypatch.setenv("CROSSVIEW_HOME", str(tmp_path))
    assert published.cached_path(weights) == tmp_path / "weights" / "matchstereo_base_fsd.pth"
    monkeypatch.delenv("CROSSVIEW_HOME")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))  # platformdirs on Linux
    assert published.home() == tmp_path / "xdg" / "crossview"


@pytest.mark.skipif(not SHAPES.exists(), reason=f"golden shapes not found at {SHAPES}")
def test_a_checkpoint_in_the_published_layout_downloads_and_loads(
        server: WeightsServer, cached: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """MatchStereo-T's real key names and shapes (the authors' state dict), each tensor filled
    with its index so that a key mix-up would show."""
    shapes = json.loads(SHAPES.read_text())["tiny"]
    state = {key: torch.full(shape, float(i)) for i, (key, shape) in enumerate(shapes.items())}
    spec = registry.get_spec("matchstereo-t")
    file = spec.published.file
    monkeypatch.setitem(registry.MODELS.entries, "matchstereo-t", dataclasses.replace(
        spec, published=PublishedWeights(file, server.url(file))))
    server.routes[f"/{file}"] = Answer(checkpoint_bytes(state, optimizer={}, epoch=100))
    model = api.load_model("matchstereo-t", download=True)
    loaded = model.state_dict()
    assert sorted(loaded) == sorted(state)
    assert all(torch.equal(loaded[key], value) for key, value in state.items())
    assert model.weights_source == str(cached.parent / file)
