"""``crossview.console``: the consoles work at any width the environment claims (rich prints
nothing at ``COLUMNS=0`` and squeezes tables to nothing on a very narrow terminal)."""

from __future__ import annotations

import io

import pytest

from crossview import console


@pytest.mark.parametrize(("columns", "width"), [
    ("0", console.DEFAULT_WIDTH),  # 0 is "unknown", as shutil.get_terminal_size reads it
    ("1", console.MIN_WIDTH), (str(console.MIN_WIDTH - 1), console.MIN_WIDTH),
    ("120", 120),
])
def test_the_width_is_never_0_nor_below_the_minimum(monkeypatch: pytest.MonkeyPatch,
                                                    columns: str, width: int) -> None:
    monkeypatch.setenv("COLUMNS", columns)
    out = io.StringIO()
    made = console._Console(file=out, soft_wrap=True)
    assert made.width == width
    made.print("error: " + "x" * 300)
    assert out.getvalue() == "error: " + "x" * 300 + "\n"


def test_a_size_set_by_hand_is_kept() -> None:
    made = console._Console(file=io.StringIO())
    made.size = (100, 30)
    assert (made.width, made.height) == (100, 30)
