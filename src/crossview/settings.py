"""Typed, bounded dataclass fields: a setting's type and range are declared once, on its field,
and checked wherever values arrive (a YAML file, a JSON description, keyword arguments).

Example:
    >>> from dataclasses import dataclass
    >>> @dataclass
    ... class Optim:
    ...     lr: float = setting(4e-4, low=0, low_open=True)                   # > 0
    ...     betas: tuple[float, float] = setting((0.9, 0.999), low=0, high=1, high_open=True)
    >>> build(Optim, {"lr": -0.001}, "optim")
    Traceback (most recent call last):
    ...
    crossview.settings.SettingError: optim.lr must be > 0, got -0.001

:func:`build` makes such a dataclass from a mapping: an unknown key, a wrong type or a value out
of range is a :class:`SettingError` whose message starts with the key's full path (and quotes
the value at most :data:`crossview.errors.SHOWN_CHARS` long).
:func:`check` validates an instance (call it from ``__post_init__``, so that keyword
construction is checked too). Floats must be finite; a bound on a tuple field applies to each
entry; a field without a bound is only type-checked.
"""

from __future__ import annotations

import dataclasses
import math
import types
import typing
from dataclasses import dataclass
from typing import Any

from crossview.errors import UserError, shown


class SettingError(UserError, ValueError):
    """A setting of the wrong type or outside its range; the message starts with its path.

    A :class:`UserError` for the CLI (one line, exit code 2) and a ``ValueError`` for library
    callers."""


@dataclass(frozen=True)
class Bound:
    """Where a number may lie: ``low``/``high`` (``None``: unbounded), each end closed unless
    ``*_open``; ``odd`` integers only; or one of ``choices`` (any type)."""

    low: float | None = None
    high: float | None = None
    low_open: bool = False
    high_open: bool = False
    odd: bool = False
    choices: tuple[Any, ...] = ()

    def admits(self, value: Any) -> bool:
        if self.choices:
            return value in self.choices
        if self.low is not None and (value <= self.low if self.low_open else value < self.low):
            return False
        if self.high is not None and (value >= self.high if self.high_open
                                      else value > self.high):
            return False
        return not self.odd or value % 2 == 1

    def __str__(self) -> str:
        if self.choices:
            return "one of " + ", ".join(repr(choice) for choice in self.choices)
        low, high = _number(self.low), _number(self.high)
        if self.low is not None and self.high is not None:
            text = (f"in {'(' if self.low_open else '['}{low}, {high}"
                    f"{')' if self.high_open else ']'}")
        elif self.low is not None:
            text = f"{'>' if self.low_open else '>='} {low}"
        elif self.high is not None:
            text = f"{'<' if self.high_open else '<='} {high}"
        else:
            text = "any value"
        return text + (" and odd" if self.odd else "")


def _number(value: float | None) -> str:
    """``2147483647`` rather than ``2.14748e+09``; ``0.001`` as it is."""
    if value is None:
        return ""
    return str(int(value)) if float(value).is_integer() else f"{value:g}"


def setting(default: Any, **bound: Any) -> Any:
    """A dataclass field with ``default`` and the :class:`Bound` ``bound`` (its keywords)."""
    return dataclasses.field(default=default, metadata={"bound": Bound(**bound)})


def _type_name(annotation: Any) -> str:
    return getattr(annotation, "__name__", str(annotation))


def convert(value: Any, annotation: Any, path: str, bound: Bound | None = None) -> Any:
    """``value`` checked against a field annotation and ``bound``, converted where a mapping
    read from YAML/JSON differs from the field's type (int -> float, list -> tuple, nested
    mappings -> dataclasses). :class:`SettingError` naming ``path`` otherwise."""
    origin = typing.get_origin(annotation)
    if dataclasses.is_dataclass(annotation):
        if dataclasses.is_dataclass(value) and isinstance(value, annotation):
            check(value, path)
            return value
        if not isinstance(value, dict):
            raise SettingError(f"{path} must be a mapping, got {shown(value)}")
        return build(annotation, value, path)
    if origin is dict:
        if not isinstance(value, dict):
            raise SettingError(f"{path} must be a mapping, got {shown(value)}")
        return dict(value)
    if origin is tuple:
        kinds = typing.get_args(annotation)
        if len(kinds) == 2 and kinds[1] is Ellipsis:  # tuple[X, ...]: any length
            if not isinstance(value, list | tuple):
                raise SettingError(f"{path} must be a list, got {shown(value)}")
            kinds = (kinds[0],) * len(value)
        if not isinstance(value, list | tuple) or len(value) != len(kinds):
            raise SettingError(f"{path} must be a list of {len(kinds)} values, "
                               f"got {shown(value)}")
        return tuple(convert(v, k, f"{path}[{i}]", bound)
                     for i, (v, k) in enumerate(zip(value, kinds, strict=True)))
    if origin in (typing.Union, types.UnionType):
        if value is None and type(None) in typing.get_args(annotation):
            return None
        annotation = next(a for a in typing.get_args(annotation) if a is not type(None))
    if annotation is float and isinstance(value, int | float) and not isinstance(value, bool):
        try:
            number = float(value)
        except OverflowError:  # an integer beyond the largest float
            number = math.inf
        if not math.isfinite(number):
            raise SettingError(f"{path} must be a finite number, got {shown(value)}")
        value = number
    elif annotation not in (int, str, bool) or type(value) is not annotation:
        raise SettingError(f"{path} must be {_type_name(annotation)}, got {shown(value)}")
    if bound is not None and not bound.admits(value):
        raise SettingError(f"{path} must be {bound}, got {shown(value)}")
    return value


def _bound(field: dataclasses.Field) -> Bound | None:
    return field.metadata.get("bound")


def build(cls: type, values: dict[str, Any], prefix: str = "") -> Any:
    """An instance of the dataclass ``cls`` from ``values`` (keys are field names; missing ones
    keep their defaults). Errors name ``prefix.key``."""
    hints = typing.get_type_hints(cls)
    fields = {f.name: f for f in dataclasses.fields(cls)}
    kwargs = {}
    for key, value in values.items():
        path = f"{prefix}.{key}" if prefix else str(key)
        if key not in fields:
            raise SettingError(f"unknown key {shown(path)} (known: {', '.join(sorted(fields))})")
        kwargs[key] = convert(value, hints[key], path, _bound(fields[key]))
    try:
        return cls(**kwargs)
    except SettingError as error:  # a rule across fields, raised by the class's own check
        raise SettingError(f"{prefix}.{error}" if prefix else str(error)) from None


def check(instance: Any, prefix: str = "") -> None:
    """Validate every field of the dataclass ``instance`` (:class:`SettingError` naming the
    first bad one); nested dataclass fields are checked in turn."""
    hints = typing.get_type_hints(type(instance))
    for field in dataclasses.fields(instance):
        path = f"{prefix}.{field.name}" if prefix else field.name
        convert(getattr(instance, field.name), hints[field.name], path, _bound(field))
