"""``crossview.errors.shown``: a value quoted in a message stays short, whatever its size."""

from __future__ import annotations

import pytest

from crossview.errors import SHOWN_CHARS, shown


@pytest.mark.parametrize(("value", "text"), [
    ("lots", "'lots'"), (1.5, "1.5"), (None, "None"), (True, "True"), (-3, "-3"),
    ([1, 2], "[1, 2]"), ({"a": 1}, "{'a': 1}"),
    (10**5000, "<an integer of about 5001 digits>"),  # repr() itself raises ValueError
    (-(10**100), "<an integer of about 101 digits>"),
    (list(range(10**6)), "[0, 1, 2, 3, 4, 5, ...]"),
], ids=["str", "float", "None", "bool", "int", "list", "dict", "5001 digits", "101 digits",
        "a million items"])
def test_small_values_as_repr_huge_ones_abbreviated(value: object, text: str) -> None:
    assert shown(value) == text


@pytest.mark.parametrize("value", ["x" * 10**6, ["y" * 10**5] * 100, {"k" * 10**5: "v"},
                                   [[[[[[[["deep"]]]]]]]], 7.0 * 10**300],
                         ids=["long string", "long strings", "long key", "deep", "float"])
def test_never_longer_than_the_limit(value: object) -> None:
    assert len(shown(value)) <= SHOWN_CHARS
