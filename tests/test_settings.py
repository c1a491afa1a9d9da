"""``crossview.settings``: typed, bounded dataclass fields and the errors naming their path."""

from __future__ import annotations

from dataclasses import dataclass, field

import pytest

from crossview.errors import UserError
from crossview.settings import Bound, SettingError, build, check, setting


@dataclass
class Inner:
    rate: float = setting(0.1, low=0, low_open=True)
    pair: tuple[float, float] = setting((0.5, 0.5), low=0, high=1, high_open=True)
    window: int = setting(3, low=1, odd=True)
    mode: str = setting("a", choices=("a", "b"))
    flag: bool = True
    free: int = 7


@dataclass
class Outer:
    inner: Inner = field(default_factory=Inner)
    seed: int = setting(0, low=0, high=2**31 - 1)

    def __post_init__(self) -> None:
        check(self)


def test_valid_values_are_converted_like_yaml_needs() -> None:
    built = build(Outer, {"inner": {"rate": 2, "pair": [0, 0.25]}, "seed": 5}, "cfg")
    assert built.inner.rate == 2.0 and isinstance(built.inner.rate, float)
    assert built.inner.pair == (0.0, 0.25) and built.seed == 5


@pytest.mark.parametrize(("values", "message"), [
    ({"inner": {"rate": 0}}, "cfg.inner.rate must be > 0, got 0.0"),
    ({"inner": {"rate": float("nan")}}, "cfg.inner.rate must be a finite number, got nan"),
    ({"inner": {"rate": "fast"}}, "cfg.inner.rate must be float, got 'fast'"),
    ({"inner": {"rate": True}}, "cfg.inner.rate must be float, got True"),
    ({"inner": {"pair": [0.5, 1]}}, r"cfg.inner.pair[1] must be in [0, 1), got 1.0"),
    ({"inner": {"pair": [0.5]}}, "cfg.inner.pair must be a list of 2 values, got [0.5]"),
    ({"inner": {"window": 2}}, "cfg.inner.window must be >= 1 and odd, got 2"),
    ({"inner": {"window": 3.0}}, "cfg.inner.window must be int, got 3.0"),
    ({"inner": {"mode": "c"}}, "cfg.inner.mode must be one of 'a', 'b', got 'c'"),
    ({"inner": {"flag": 1}}, "cfg.inner.flag must be bool, got 1"),
    ({"inner": {"free": "x"}}, "cfg.inner.free must be int, got 'x'"),
    ({"inner": {"speed": 1}}, "unknown key 'cfg.inner.speed' (known: flag, free, mode, pair, "),
    ({"inner": 3}, "cfg.inner must be a mapping, got 3"),
    ({"seed": 2**31}, "cfg.seed must be in [0, 2147483647], got 2147483648"),
    ({"inner": {"rate": 10**400}}, "cfg.inner.rate must be a finite number, got <an integer of "
                                   "about 401 digits>"),
    ({"seed": 10**5000}, "cfg.seed must be in [0, 2147483647], got <an integer of about 5001 "
                         "digits>"),
])
def test_a_bad_value_is_one_error_naming_its_path(values: dict, message: str) -> None:
    with pytest.raises(SettingError) as raised:
        build(Outer, values, "cfg")
    assert str(raised.value).startswith(message)
    assert isinstance(raised.value, UserError) and isinstance(raised.value, ValueError)


def test_keyword_construction_is_checked_too() -> None:
    with pytest.raises(SettingError, match=r"^inner.rate must be > 0, got -1.0$"):
        Outer(inner=Inner(rate=-1.0))
    with pytest.raises(SettingError, match=r"^seed must be in \[0, 2147483647\], got -3$"):
        Outer(seed=-3)


@pytest.mark.parametrize(("bound", "text"), [
    (Bound(low=0), ">= 0"), (Bound(low=0, low_open=True), "> 0"), (Bound(high=1), "<= 1"),
    (Bound(low=0, high=1, high_open=True), "[0, 1)"), (Bound(low=1e-3), ">= 0.001"),
    (Bound(choices=("x",)), "one of 'x'"), (Bound(low=1, odd=True), ">= 1 and odd"),
])
def test_bounds_describe_themselves(bound: Bound, text: str) -> None:
    assert text in str(bound)


def test_a_tuple_of_any_length_takes_lists_and_checks_each_entry() -> None:
    @dataclass
    class Names:
        names: tuple[str, ...] = ()

    assert build(Names, {"names": ["a", "b", "c"]}).names == ("a", "b", "c")
    assert build(Names, {"names": []}).names == ()
    with pytest.raises(SettingError, match=r"names must be a list, got 'a'"):
        build(Names, {"names": "a"})
    with pytest.raises(SettingError, match=r"names\[1\] must be str, got 2"):
        build(Names, {"names": ["a", 2]})


@pytest.mark.parametrize("values", [
    {"inner": {"mode": "m" * 10**6}},
    {"inner": {"pair": list(range(10**6))}},
    {"inner": {"x" * 10**5: 1}},
    {"inner": {"rate": {"k": ["v" * 10**5] * 1000}}},
], ids=["long string", "long list", "long key", "nested"])
def test_a_huge_value_is_quoted_short(values: dict) -> None:
    with pytest.raises(SettingError) as raised:
        build(Outer, values, "cfg")
    message = str(raised.value)
    assert len(message) < 200 and "m" * 81 not in message and "x" * 81 not in message
