"""``crossview.memory``: the memory a run may use and the one-line refusal."""

from __future__ import annotations

import pytest

from crossview import memory
from crossview.errors import UserError


def test_the_environment_variable_sets_the_limit(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(memory.ENV_VAR, "1.5")
    assert memory.available_memory() == (3 * 2**29, "$CROSSVIEW_MAX_MEMORY_GB")


def test_without_it_the_kernel_says(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(memory.ENV_VAR, raising=False)
    available, source = memory.available_memory()
    assert available > 0 and source in ("MemAvailable", "free memory")


@pytest.mark.parametrize("value", ["lots", "0", "-2", "nan", "inf"])
def test_a_bad_limit_is_named(monkeypatch: pytest.MonkeyPatch, value: str) -> None:
    monkeypatch.setenv(memory.ENV_VAR, value)
    with pytest.raises(UserError, match=rf"^\$CROSSVIEW_MAX_MEMORY_GB must be a positive number "
                                        rf"of GiB, got '{value}'$"):
        memory.available_memory()


def test_a_run_over_the_limit_is_refused_with_advice(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(memory.ENV_VAR, "2")
    memory.check_memory(2 * 2**30, "a run", "do less")  # exactly the limit fits
    with pytest.raises(UserError) as raised:
        memory.check_memory(3 * 2**30, "a run at 9000x9000 px", "do less")
    assert str(raised.value) == ("a run at 9000x9000 px needs about 3 GiB of memory (estimate), "
                                 "more than the 2 GiB available ($CROSSVIEW_MAX_MEMORY_GB); "
                                 "do less")


@pytest.mark.parametrize(("count", "text"), [(512, "0.5 KiB"), (5 * 2**20, "5 MiB"),
                                             (int(27.34 * 2**30), "27.3 GiB"),
                                             (3 * 2**40, "3 TiB")])
def test_sizes_are_binary_units(count: int, text: str) -> None:
    assert memory.format_bytes(count) == text


def test_the_limit_alone_is_none_when_unset(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(memory.ENV_VAR, raising=False)
    assert memory.memory_limit() is None
    monkeypatch.setenv(memory.ENV_VAR, "0.5")
    assert memory.memory_limit() == 2**29


def test_a_bad_limit_is_quoted_short(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(memory.ENV_VAR, "x" * 10_000)
    with pytest.raises(UserError) as raised:
        memory.memory_limit()
    assert len(str(raised.value)) < 150


@pytest.mark.parametrize(("shape", "itemsize", "size"), [
    ((100000, 100000), 4, 40_000_000_000), ((), 8, 8), ((3, 0, 5), 4, 0),
    ((10**30, 10**30), 2, 2 * 10**60),  # a header may claim anything: exact, no overflow
])
def test_array_bytes_are_exact(shape: tuple[int, ...], itemsize: int, size: int) -> None:
    assert memory.array_bytes(shape, itemsize) == size
