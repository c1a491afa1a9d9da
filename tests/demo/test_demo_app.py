"""The demo's page: its tabs and fields are there, and its handlers answer in the page."""

from __future__ import annotations

import logging
import os
from pathlib import Path

import pytest

gr = pytest.importorskip("gradio", reason='the demo needs gradio: pip install "crossview[demo]"')

from crossview.demo import app, models  # noqa: E402
from crossview.demo.errors import in_page  # noqa: E402
from crossview.demo.uploads import image_field  # noqa: E402
from crossview.errors import UserError  # noqa: E402


def test_the_page_has_three_tabs_and_no_usage_statistics() -> None:
    page = app.build()
    ids = {block.elem_id for block in page.blocks.values()}
    assert {"tab-stereo", "tab-flow", "tab-matching", "stereo-run", "stereo-disparity",
            "stereo-cloud", "flow-run", "flow-picture", "match-source",
            "match-transferred"} <= ids
    assert os.environ["GRADIO_ANALYTICS_ENABLED"] == "False" and not page.analytics_enabled
    pictures = [block for block in page.blocks.values() if isinstance(block, gr.Image)]
    assert {picture.format for picture in pictures} == {"png"}  # no lossy WebP


def test_the_model_choices_run_offline_default_first() -> None:
    assert models.choices("stereo")[:2] == ["matchstereo-hybrid", "matchstereo-mini"]
    assert models.choices("flow")[0] == "matchflow-hybrid"
    assert "matchstereo-b" not in models.choices("stereo")  # published, not downloaded


def test_handlers_answer_in_the_page(caplog: pytest.LogCaptureFixture) -> None:
    def mistaken() -> None:
        raise UserError("a mistake")

    def broken() -> None:
        raise RuntimeError("a bug")

    def warning() -> str:
        logging.getLogger("crossview.api").warning("careful")
        return "done"

    with pytest.raises(gr.Error) as raised:
        in_page(mistaken)()
    assert (raised.value.message, raised.value.print_exception) == ("a mistake", False)
    with pytest.raises(gr.Error) as raised:
        in_page(broken)()
    assert raised.value.message.startswith("crossview failed (RuntimeError: a bug); the terminal")
    assert "RuntimeError: a bug" in caplog.text  # the traceback, on the terminal's log
    with pytest.warns(UserWarning, match="^careful$"):  # gr.Warning outside a request
        assert in_page(warning)() == "done"


def test_an_upload_reaches_its_handler_undecoded(tmp_path: Path) -> None:
    (tmp_path / "broken.png").write_text("not an image")  # gr.Image would fail to open it
    field = image_field()
    payload = field.data_model(path=str(tmp_path / "broken.png"), orig_name="broken.png")
    assert field.preprocess(payload) == str(tmp_path / "broken.png")
    assert field.preprocess(None) is None
    # Gradio writes a .pyi stub beside the module of a component subclass: there is none
    assert not list(Path(app.__file__).parent.glob("*.pyi"))
