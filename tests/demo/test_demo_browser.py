"""``crossview demo`` in a real browser: the command serves the page on a free local port,
Playwright drives Debian's Chromium (``/usr/bin/chromium``, headless) through it, and the
disparity picture the page shows, downloaded pixel for pixel, is what ``crossview stereo``
writes for the same pair. Every request the page makes stays on this computer (the demo runs
offline). A bad upload is answered in the page with crossview's message; the speed choice is
disabled for a model that takes no preset; a click on the matching tab's source transfers the
point.

Skipped, with the reason, without gradio, playwright or ``/usr/bin/chromium``; with
``CROSSVIEW_REQUIRE_BROWSER=1`` (CI) that is a failure instead. The page's screenshot is
written to the test's folder, and with ``CROSSVIEW_UPDATE_SCREENSHOT=1`` also to
``docs/images/demo.png`` (the README's picture).
"""

from __future__ import annotations

import io
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import urlparse

import numpy as np
import pytest
from PIL import Image

from hang_guard import HANG_GUARD_SECONDS

ROOT = Path(__file__).resolve().parents[2]
CHROMIUM = Path("/usr/bin/chromium")
CHROMIUM_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
                 "--disable-component-update", "--disable-sync", "--no-first-run"]
STARTUP_SECONDS = 300  # the first start imports torch and gradio and compiles nothing: a guard
RUN_SECONDS = 300  # one model run on a loaded 2-core machine: a guard, not a timing
SCREENSHOT = ROOT / "docs" / "images" / "demo.png"

pytestmark = pytest.mark.browser


def _missing() -> str | None:
    """Why the browser test cannot run here (``None``: it can)."""
    for module, install in (("gradio", 'pip install "crossview[demo]"'),
                            ("playwright", 'pip install "crossview[demo-test]"')):
        try:
            __import__(module)
        except ImportError:
            return f"{module} is not installed ({install})"
    if not CHROMIUM.is_file():
        return f"{CHROMIUM} is missing (apt-get install chromium)"
    return None


@pytest.fixture(scope="module")
def browser_ready() -> None:
    reason = _missing()
    if reason is not None:
        if os.environ.get("CROSSVIEW_REQUIRE_BROWSER") == "1":
            pytest.fail(f"CROSSVIEW_REQUIRE_BROWSER=1 but {reason}")
        pytest.skip(reason)


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


@pytest.fixture(scope="module")
def served(browser_ready: None, tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """The URL of ``crossview demo --port PORT`` run as its own process (stopped after)."""
    port = _free_port()
    log = tmp_path_factory.mktemp("demo-server") / "server.log"
    with log.open("w") as out:
        server = subprocess.Popen([sys.executable, "-m", "crossview", "demo", "--port",
                                   str(port)], stdout=out, stderr=subprocess.STDOUT, cwd=ROOT,
                                  env={**os.environ, "PYTHONUNBUFFERED": "1"})
    url = f"http://127.0.0.1:{port}/"
    try:
        deadline = time.monotonic() + STARTUP_SECONDS
        while f"crossview demo on {url}" not in log.read_text():  # what the command prints
            assert server.poll() is None, log.read_text()
            assert time.monotonic() < deadline, log.read_text()
            time.sleep(0.5)
        with urllib.request.urlopen(url, timeout=HANG_GUARD_SECONDS) as answer:
            assert answer.status == 200
        yield url
    finally:
        server.send_signal(signal.SIGINT)
        try:
            server.wait(timeout=HANG_GUARD_SECONDS)
        except subprocess.TimeoutExpired:
            server.kill()
            server.wait()


@pytest.fixture(scope="module")
def page(served: str) -> Iterator[tuple[object, list[str]]]:
    """A Chromium page on the demo, and the list the requests that left this computer go
    to (each refused)."""
    from playwright.sync_api import sync_playwright

    outside: list[str] = []

    def local_only(route: object) -> None:
        if urlparse(route.request.url).hostname in ("127.0.0.1", "localhost"):
            route.continue_()
        else:
            outside.append(route.request.url)
            route.abort()

    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=str(CHROMIUM), args=CHROMIUM_ARGS)
        try:
            tab = browser.new_page(viewport={"width": 1280, "height": 1000})
            tab.route("**/*", local_only)
            tab.goto(served)
            yield tab, outside
        finally:
            browser.close()


def _pixels(tab: object, selector: str) -> np.ndarray:
    """The picture the ``<img>`` under ``selector`` shows, downloaded from its source."""
    source = tab.locator(f"{selector} img").first.get_attribute("src")
    reply = tab.request.get(source)
    assert reply.ok, source
    return np.asarray(Image.open(io.BytesIO(reply.body())).convert("RGB"))


def _drawn(tab: object, selector: str) -> bool:
    """Whether the element ``selector`` shows more than a blank background (the 3D viewer has
    drawn its points)."""
    shot = np.asarray(Image.open(io.BytesIO(tab.locator(selector).screenshot())).convert("L"))
    return float((shot[40:-10, 10:-10] < 200).mean()) > 0.02


def test_the_sample_pair_shows_the_disparity_of_crossview_stereo(
        page: tuple[object, list[str]], stereo_command_outputs: dict[str, np.ndarray],
        tmp_path: Path) -> None:
    tab, outside = page
    tab.click("#stereo-sample")
    tab.wait_for_selector("#stereo-left img")
    tab.wait_for_selector("#stereo-right img")
    tab.click("#stereo-run")
    tab.wait_for_selector("#stereo-disparity img", timeout=RUN_SECONDS * 1000)
    np.testing.assert_array_equal(_pixels(tab, "#stereo-disparity"),
                                  stereo_command_outputs["colour"])
    assert _pixels(tab, "#stereo-confidence").shape == (250, 370, 3)
    assert tab.locator("#stereo-summary").inner_text().startswith("matchstereo-hybrid: 370x250")
    tab.wait_for_selector("#stereo-cloud canvas", timeout=HANG_GUARD_SECONDS * 1000)
    deadline = time.monotonic() + 120
    while not _drawn(tab, "#stereo-cloud"):
        assert time.monotonic() < deadline, "the 3D viewer drew no point cloud"
        tab.wait_for_timeout(1000)
    tab.screenshot(path=str(tmp_path / "demo.png"), full_page=True)
    if os.environ.get("CROSSVIEW_UPDATE_SCREENSHOT") == "1":
        shutil.copyfile(tmp_path / "demo.png", SCREENSHOT)
    assert outside == []


def test_a_bad_upload_is_answered_in_the_page(page: tuple[object, list[str]],
                                              tmp_path: Path) -> None:
    tab, outside = page
    broken = tmp_path / "broken.png"
    broken.write_text("not an image")
    tab.locator("#stereo-left input[type=file]").set_input_files(str(broken))
    tab.wait_for_timeout(1000)
    tab.click("#stereo-run")
    toast = tab.locator(".toast-body", has_text="broken.png")
    toast.wait_for(timeout=RUN_SECONDS * 1000)
    text = toast.inner_text()
    assert "left image (broken.png): cannot read image" in text
    assert "Traceback" not in text and "/tmp/" not in text
    assert outside == []


def test_a_click_on_the_source_is_transferred(page: tuple[object, list[str]]) -> None:
    tab, outside = page
    tab.get_by_role("tab", name="Matching").click()
    tab.click("#match-sample")
    tab.wait_for_selector("#match-transferred img", timeout=RUN_SECONDS * 1000)
    summary = tab.locator("#match-summary")
    assert summary.inner_text() == "16 point(s) transferred."
    tab.click("#match-clear")
    tab.wait_for_function("document.querySelector('#match-summary').innerText"
                          ".startsWith('Click points')", timeout=RUN_SECONDS * 1000)
    source = tab.locator("#match-source img").first
    box = source.bounding_box()
    source.click(position={"x": box["width"] / 2, "y": box["height"] / 3})  # scrolled to
    tab.wait_for_function("document.querySelector('#match-summary').innerText"
                          ".startsWith('1 point')", timeout=RUN_SECONDS * 1000)
    assert _pixels(tab, "#match-transferred").shape == (300, 300, 3)
    assert outside == []


def test_the_speed_choice_follows_the_model(page: tuple[object, list[str]]) -> None:
    """A model that takes no preset disables the choice, back on ``default``, saying why."""
    tab, outside = page
    tab.get_by_role("tab", name="Stereo").click()
    field = tab.locator("#stereo-speed")
    field.locator("input[value=fast]").check()
    for model, enabled, note in (("matchstereo-mini", False, "matchstereo-mini runs with its own"),
                                 ("matchstereo-hybrid", True, "fast is the quickest")):
        tab.locator("#stereo-model input").click()
        tab.get_by_role("option", name=model, exact=True).click()
        tab.wait_for_function("document.querySelector('#stereo-speed input[value=fast]')"
                              f".disabled === {str(not enabled).lower()}",
                              timeout=HANG_GUARD_SECONDS * 1000)
        assert note in field.inner_text()
        assert field.locator("input[value=default]").is_checked()
    assert outside == []
