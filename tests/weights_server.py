"""A local HTTP server on 127.0.0.1 that plays the weights host in tests (no network).

``routes`` maps a URL path to an :class:`Answer`; the server records every path asked for.
"""

from __future__ import annotations

import dataclasses
import http.server
import io
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field

import pytest
import torch

from crossview.models import registry
from crossview.models.matchstereo import MatchStereo
from crossview.models.matchstereo.specs import matchstereo_spec
from crossview.models.published import PublishedWeights
from crossview.models.registry import ModelSpec
from small_networks import SMALL


@dataclass
class Answer:
    """What the server sends: ``status``, ``body`` as ``content_type``; with ``cut_after``, the
    full length is announced but the connection closes after that many bytes."""

    body: bytes = b""
    status: int = 200
    content_type: str = "application/octet-stream"
    cut_after: int | None = None


@dataclass
class WeightsServer:
    base: str
    routes: dict[str, Answer] = field(default_factory=dict)
    asked: list[str] = field(default_factory=list)

    def url(self, path: str) -> str:
        return f"{self.base}/{path.lstrip('/')}"


def checkpoint_bytes(state_dict: dict[str, torch.Tensor], **extra: object) -> bytes:
    """``torch.save({"model": state_dict, **extra})``: the published checkpoints' layout."""
    buffer = io.BytesIO()
    torch.save({"model": state_dict, **extra}, buffer)
    return buffer.getvalue()


@contextmanager
def weights_server() -> Iterator[WeightsServer]:
    """A running server (threaded, port chosen by the OS), shut down on exit."""
    server_state = WeightsServer("")

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            server_state.asked.append(self.path)
            answer = server_state.routes.get(self.path, Answer(b"not found", 404, "text/plain"))
            self.send_response(answer.status)
            self.send_header("Content-Type", answer.content_type)
            self.send_header("Content-Length", str(len(answer.body)))
            self.end_headers()
            sent = answer.body if answer.cut_after is None else answer.body[:answer.cut_after]
            self.wfile.write(sent)
            if answer.cut_after is not None:
                self.close_connection = True

        def log_message(self, *args: object) -> None:  # keep the test output clean
            pass

    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    server_state.base = f"http://127.0.0.1:{httpd.server_address[1]}"
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    try:
        yield server_state
    finally:
        httpd.shutdown()
        httpd.server_close()
        thread.join()


# A small MatchStereo registered with published weights on the local server, for fast tests.
TEST_MODEL = "test-published"
TEST_FILE = "test_published.pth"


def publish_test_model(server: WeightsServer, monkeypatch: pytest.MonkeyPatch,
                       url: str | None = None) -> ModelSpec:
    """Register :data:`TEST_MODEL` (for the test's duration) with its published weights at
    ``url`` (default: :data:`TEST_FILE` on ``server``)."""
    spec = dataclasses.replace(matchstereo_spec(TEST_MODEL, SMALL, "stereo"), published=(
        PublishedWeights(TEST_FILE, url or server.url(TEST_FILE))))
    monkeypatch.setitem(registry.MODELS.entries, TEST_MODEL, spec)
    return spec


def random_state_dict(seed: int = 0) -> dict[str, torch.Tensor]:
    """Random weights of the test model."""
    torch.manual_seed(seed)
    return {k: torch.randn_like(v) for k, v in MatchStereo(SMALL).state_dict().items()}
