"""One codec for the run record: result.json written and read from the records' own fields.

A record's JSON is its dataclass fields, in order, under their own names, each value by
its type: text, numbers and flags as they are (durations to the millisecond), an enum by
its value, a Target, Capability or Version as its text, a time as :func:`iso` writes it,
a tuple as a list, a record as its own JSON, a type with its own ``to_json``/``from_json``
(the container, the baseline, the policy, the launches) through those. Reading follows
the same fields' types (:func:`typing.get_type_hints`) and checks each value; every problem
is one BadInputError line naming the file and the key.

Where a record's JSON differs from its fields (keys in another order, fields left out,
a value computed, a key whose shape changed with the document's version), its
:class:`Shape` says so, once, for both directions (:mod:`gate.record.shapes`).
"""

from __future__ import annotations

import dataclasses
import enum
import operator
import types
import typing
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from gate.errors import BadInputError, ConfigError
from gate.rules.causes import RuntimeFailure
from gate.rules.targets import Capability, Target, Version

Write = Callable[[Any, "Writer"], Any]  # a key's JSON value, from the record
Check = Callable[["Reader", Mapping[str, Any], Any], None]  # a record read, against its object
Decode = Callable[["Reader", Mapping[str, Any]], Any]  # one field's value, from its object
Get = Callable[[Any], Any]

PARSED = (Target, Capability, Version)  # values written as their text, read by ``parse``


@dataclass(frozen=True)
class Key:
    """A key whose JSON is not one field's: how it is written, and how ``field`` (default:
    the key's own) is read from the object (None: the field's own way). A key with no
    field of its name and no ``read`` is written, never read; one read for no field is
    only checked."""

    write: Write | None = None
    read: Decode | None = None
    field: str = ""


@dataclass(frozen=True)
class Shape:
    """Where a record's JSON differs from its fields; the default: none."""

    keys: tuple[str, ...] = ()  # the keys in order (default: every field's name)
    # The order keys are checked in, where it is not theirs: a record with several faults
    # names the same one first as before the codec.
    reads: tuple[str, ...] = ()
    before: Decode | None = None  # checked first
    absent: frozenset[str] = frozenset()  # fields that may be absent: their default
    loose: frozenset[str] = frozenset()  # optional records: a value not an object is None
    labels: Mapping[str, str] = field(default_factory=dict)  # an enum's bad-value phrase
    special: Mapping[str, Key] = field(default_factory=dict)
    check: Check | None = None  # what a record read must agree with in its object


SHAPES: dict[type, Shape] = {}


def declare(cls: type, shape: Shape) -> None:
    """Say where ``cls``'s JSON differs from its fields."""
    SHAPES[cls] = shape


def iso(moment: datetime) -> str:
    """A time as result.json writes it: UTC, to the second (``2026-11-29T18:00:00Z``)."""
    return moment.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def _keys(cls: type) -> tuple[str, ...]:
    return SHAPES.get(cls, Shape()).keys or tuple(f.name for f in dataclasses.fields(cls))


def _optional(hint: Any) -> tuple[Any, bool]:  # noqa: ANN401
    """``hint`` without ``| None``, and whether it had it."""
    if isinstance(hint, types.UnionType) or typing.get_origin(hint) is typing.Union:
        args = [a for a in typing.get_args(hint) if a is not type(None)]
        if len(args) == 1:
            return args[0], True
    return hint, False


def _element(hint: Any) -> Any | None:  # noqa: ANN401
    """``X`` of ``tuple[X, ...]``, else None."""
    if typing.get_origin(hint) is tuple:
        args = typing.get_args(hint)
        if len(args) == 2 and args[1] is Ellipsis:
            return args[0]
    return None


# Writing.


class Writer:
    """Writes records as result.json holds them; ``listings`` False leaves each loaded
    library's listing out (null)."""

    # Per record type and ``listings``: each key, how its value is got from the record,
    # and how that value is written (None: as it is). Built once, bound to a writer.
    _plans: typing.ClassVar[dict[tuple[type, bool], list[tuple[str, Get, Get | None]]]] = {}

    def __init__(self, *, listings: bool = True) -> None:
        self.listings = listings

    def record(self, value: Any) -> dict[str, Any]:  # noqa: ANN401
        """A record's JSON object."""
        plan = self._plans.get((type(value), self.listings))
        if plan is None:
            plan = self._plans[type(value), self.listings] = self._plan(type(value))
        return {
            key: get(value) if encode is None else encode(get(value)) for key, get, encode in plan
        }

    def _plan(self, cls: type) -> list[tuple[str, Get, Get | None]]:
        shape = SHAPES.get(cls, Shape())
        hints = typing.get_type_hints(cls)
        plan: list[tuple[str, Get, Get | None]] = []
        for key in _keys(cls):
            special = shape.special.get(key)
            if special is not None and special.write is not None:
                plan.append((key, _itself, self._bound(special.write)))
                continue
            hint = hints.get(key)
            if hint is None:  # a property: what it decides is written, by its type
                hint = typing.get_type_hints(getattr(cls, key).fget)["return"]
            plan.append((key, operator.attrgetter(key), self._encoder(hint)))
        return plan

    def _bound(self, write: Write) -> Get:
        return lambda record: write(record, self)

    def _encoder(self, hint: Any) -> Get | None:  # noqa: ANN401, PLR0911 (one return per kind)
        """How a value of type ``hint`` is written (None: as it is)."""
        inner, optional = _optional(hint)
        if optional:
            once = self._encoder(inner)
            return None if once is None else (lambda v: None if v is None else once(v))
        element = _element(inner)
        if element is not None:
            each = self._encoder(element)
            return list if each is None else (lambda v: [each(x) for x in v])
        if inner in (str, int, bool):
            return None
        if inner is float:
            return lambda v: round(v, 3)
        if inner is datetime:
            return iso
        if inner in PARSED:
            return str
        if inner is RuntimeFailure:  # by the runtime's own text, as the log shows it
            return operator.attrgetter("text")
        if isinstance(inner, type) and issubclass(inner, enum.IntEnum):
            return int
        if isinstance(inner, type) and issubclass(inner, enum.Enum):
            return operator.attrgetter("_value_")  # ``value``, without its slow descriptor
        if inner in SHAPES or (dataclasses.is_dataclass(inner) and not hasattr(inner, "to_json")):
            return self.record
        return operator.methodcaller("to_json")


def _itself(value: Any) -> Any:  # noqa: ANN401
    return value


# Reading.


class Reader:
    """Reads one result.json; every problem is one BadInputError line naming the file."""

    # Per record type: each field's name ("": only checked) and how it is read, in the
    # order they are read; and what the record must agree with.
    _plans: typing.ClassVar[dict[type, tuple[list[tuple[str, Decode]], Check | None]]] = {}

    def __init__(self, where: str, version: int = 0) -> None:
        self.where = where
        self.version = version
        # Targets and versions repeat across thousands of listing entries: parse each once.
        self._parsed: dict[tuple[type, str], Any] = {}

    def record(self, cls: type, data: Mapping[str, Any]) -> Any:  # noqa: ANN401
        """A ``cls`` from its JSON object."""
        return self.records(cls, [data])[0]

    def records(self, cls: type, items: list[Any]) -> tuple[Any, ...]:
        """Each of ``items`` (objects) as a ``cls``."""
        known = self._plans.get(cls)
        if known is None:
            known = self._plans[cls] = _read_plan(cls), SHAPES.get(cls, Shape()).check
        plan, check = known
        made = []
        for data in items:
            values = {name: decode(self, data) for name, decode in plan}
            values.pop("", None)
            record = cls(**values)
            if check is not None:
                check(self, data, record)
            made.append(record)
        return tuple(made)

    # The values: each a BadInputError naming the key when missing or of another type.

    def fail(self, what: str) -> BadInputError:
        """The error for ``what`` is wrong with the document."""
        return BadInputError(f"{self.where}: not a cuda-gate run record: {what}")

    def obj(self, data: Mapping[str, Any], key: str) -> Mapping[str, Any]:
        """An object."""
        value = data.get(key)
        if not isinstance(value, Mapping):
            raise self.fail(f"{key!r} is missing or not an object")
        return value

    def objs(self, data: Mapping[str, Any], key: str, *, default: bool = False) -> list[Any]:
        """A list of objects (with ``default``, an absent key is an empty list)."""
        if default and key not in data:
            return []
        value = data.get(key)
        if not isinstance(value, list) or not all(isinstance(v, Mapping) for v in value):
            raise self.fail(f"{key!r} is missing or not a list of objects")
        return value

    def text(self, data: Mapping[str, Any], key: str, *, optional: bool = False) -> Any:  # noqa: ANN401
        """A string (or, ``optional``, null)."""
        value = data.get(key)
        if value is None and optional:
            return None
        if not isinstance(value, str):
            raise self.fail(f"{key!r} is missing or not a string")
        return value

    def flag(self, data: Mapping[str, Any], key: str, default: bool | None = None) -> bool:
        """true or false (``default`` when absent)."""
        value = data.get(key, default)
        if not isinstance(value, bool):
            raise self.fail(f"{key!r} is missing or not true/false")
        return value

    def optional_flag(self, data: Mapping[str, Any], key: str) -> bool | None:
        """true, false or null."""
        value = data.get(key)
        if value is not None and not isinstance(value, bool):
            raise self.fail(f"{key!r} is not true, false or null")
        return value

    def number(self, data: Mapping[str, Any], key: str, default: float | None = None) -> float:
        """A number (``default`` when absent)."""
        value = data.get(key, default)
        if isinstance(value, bool) or not isinstance(value, int | float):
            raise self.fail(f"{key!r} is missing or not a number")
        return float(value)

    def integer(self, data: Mapping[str, Any], key: str, *, optional: bool = False) -> Any:  # noqa: ANN401
        """An integer (or, ``optional``, null)."""
        value = data.get(key)
        if value is None and optional:
            return None
        if isinstance(value, bool) or not isinstance(value, int):
            raise self.fail(f"{key!r} is missing or not an integer")
        return value

    def strings(self, data: Mapping[str, Any], key: str, what: str = "") -> list[str]:
        """A list of strings (empty when absent); ``what`` names the key in the error."""
        value = data.get(key, [])
        if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
            raise self.fail(f"{what or repr(key)} is not a list of strings")
        return value

    def member(self, kind: type[enum.Enum], value: object, label: str) -> Any:  # noqa: ANN401
        """``kind(value)``; the error names the value with ``label``."""
        try:
            return kind(value)
        except ValueError as e:
            raise self.fail(f"{label} {value!r}") from e

    def parsed(self, kind: Any, text: str | None) -> Any:  # noqa: ANN401
        """``kind.parse(text)`` (a Target, Capability or Version), None for None."""
        if text is None:
            return None
        known = self._parsed.get((kind, text))
        if known is not None:
            return known
        try:
            value = self._parsed[kind, text] = kind.parse(text)
        except ConfigError as e:
            raise self.fail(e.message) from e
        return value

    def when(self, text: str) -> datetime:
        """A time as result.json writes it."""
        try:
            return datetime.strptime(text, "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=UTC)
        except ValueError as e:
            raise self.fail(f"time {text!r} is not YYYY-MM-DDTHH:MM:SSZ") from e


def _read_plan(cls: type) -> list[tuple[str, Decode]]:
    shape = SHAPES.get(cls, Shape())
    hints = typing.get_type_hints(cls)
    fields = {f.name: f.default for f in dataclasses.fields(cls)}
    plan: list[tuple[str, Decode]] = []
    if shape.before is not None:
        plan.append(("", shape.before))
    for key in shape.reads or _keys(cls):
        special = shape.special.get(key)
        if special is not None and special.read is not None:
            name = special.field or key
            plan.append((name if name in fields else "", special.read))
        elif key in hints and (special is None or special.write is None):
            default = fields[key] if key in shape.absent else None
            plan.append((key, _decoder(hints[key], key, shape, default)))
    return plan


def _decoder(hint: Any, key: str, shape: Shape, default: Any) -> Decode:  # noqa: ANN401, PLR0911
    """How the value of ``key``, of type ``hint``, is read."""
    inner, optional = _optional(hint)
    element = _element(inner)
    if element is not None:
        return _list_decoder(element, key, absent=key in shape.absent)
    if key in shape.loose or (optional and hasattr(inner, "from_json")):
        return _optional_record(inner, key, loose=key in shape.loose)
    if inner is str:
        return lambda r, d: r.text(d, key, optional=optional)
    if inner is bool:
        if optional:
            return lambda r, d: r.optional_flag(d, key)
        return lambda r, d: r.flag(d, key, default)
    if inner is int:
        return lambda r, d: r.integer(d, key, optional=optional)
    if inner is float:
        return lambda r, d: r.number(d, key, default)
    if inner is datetime:
        return lambda r, d: r.when(r.text(d, key))
    if inner in PARSED:
        return lambda r, d: r.parsed(inner, r.text(d, key, optional=optional))
    if inner is RuntimeFailure:
        return lambda r, d: RuntimeFailure.from_text(r.text(d, key, optional=True))
    if isinstance(inner, type) and issubclass(inner, enum.Enum):
        return _member_decoder(inner, key, shape.labels[key], optional=optional)
    return lambda r, d: r.record(inner, r.obj(d, key))


def _member_decoder(kind: type[enum.Enum], key: str, label: str, *, optional: bool) -> Decode:
    members = {m.value: m for m in kind}  # looked up directly: an enum's call is slow

    def decode(r: Reader, d: Mapping[str, Any]) -> Any:  # noqa: ANN401
        value = d.get(key)
        if value is None and optional:
            return None
        try:
            return members[value]
        except (KeyError, TypeError):  # TypeError: a list or an object
            return r.member(kind, value, label)

    return decode


def _list_decoder(element: Any, key: str, *, absent: bool) -> Decode:  # noqa: ANN401
    if element is str:
        return lambda r, d: tuple(r.strings(d, key))
    if element in PARSED:
        return lambda r, d: tuple(r.parsed(element, t) for t in r.strings(d, key))
    return lambda r, d: r.records(element, r.objs(d, key, default=absent))


def _optional_record(kind: Any, key: str, *, loose: bool) -> Decode:  # noqa: ANN401
    """An optional record: null (with ``loose``, anything not an object) is None."""
    own = getattr(kind, "from_json", None)

    def decode(r: Reader, d: Mapping[str, Any]) -> Any:  # noqa: ANN401
        value = d.get(key)
        if value is None or (loose and not isinstance(value, Mapping)):
            return None
        return own(value, r.where) if own is not None else r.record(kind, value)

    return decode
