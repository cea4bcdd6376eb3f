"""The compatibility rules of ``compat.json`` as frozen records, validated once at load.

The way auditwheel loads its policies: the shipped JSON is parsed into typed records
(PTX ISA -> minimum driver rows, ISA series for minors newer than the table, family
targets and their members, the rule for a family the table does not list), every value
checked and every source cited, and looked up by value, never by string key. A file
that does not validate is refused with one line; nothing falls back in code.
"""

from __future__ import annotations

import enum
import json
from collections.abc import Mapping
from dataclasses import dataclass
from functools import cache
from pathlib import Path as FilePath
from types import MappingProxyType
from typing import Any

from gate.errors import ConfigError
from gate.reader.targets import Capability, Target, Variant, Version

SCHEMA_VERSION = 2
DATA = FilePath(__file__).with_name("compat.json")


class FamilyRule(enum.Enum):
    """What an ``f`` target the table does not list serves (a typed rule, named in the data)."""

    SAME_MAJOR_AT_OR_ABOVE = "same-major-at-or-above"

    def members(self, target: Target) -> frozenset[Capability]:
        """The capabilities ``target`` serves under this rule (minors are one digit)."""
        return frozenset(Capability(target.major, m) for m in range(target.minor, 10))


@dataclass(frozen=True)
class IsaSeries:
    """ISA ``isa_major.m`` needs driver ``driver_major.m`` when the table has no row for it."""

    isa_major: int
    driver_major: int
    source: str

    def min_driver(self, isa: Version) -> Version | None:
        """The minimum driver for ``isa`` under this series, or None if it is not in it."""
        return Version(self.driver_major, isa.minor) if isa.major == self.isa_major else None


@dataclass(frozen=True)
class Family:
    """A family-specific target and the capabilities it serves."""

    target: Target
    members: frozenset[Capability]


@dataclass(frozen=True)
class CompatRules:
    """Every rule of ``compat.json``; lookups by value (Version, SM number)."""

    sources: Mapping[str, str]
    isa_table: Mapping[Version, Version]
    isa_series: tuple[IsaSeries, ...]
    families: Mapping[int, Family]  # by SM number: 120 for sm_120f
    unlisted_family: FamilyRule
    isa_source: str
    family_source: str

    def min_driver_for_ptx(self, isa: Version) -> Version | None:
        """The table's row for ``isa``, else its series' rule, else None (no known minimum)."""
        found = self.isa_table.get(isa)
        if found is not None:
            return found
        return next((d for s in self.isa_series if (d := s.min_driver(isa)) is not None), None)

    def family_members(self, target: Target) -> frozenset[Capability]:
        """Capabilities an ``f`` target serves: its listed members, else the unlisted rule's."""
        listed = self.families.get(target.number)
        return listed.members if listed is not None else self.unlisted_family.members(target)


@cache
def rules() -> CompatRules:
    """The shipped rules, loaded and validated once per process."""
    return load(DATA.read_text(encoding="utf-8"), str(DATA.name))


def load(text: str, name: str = "compat.json") -> CompatRules:
    """Parse and validate a ``compat.json`` document; ConfigError naming the problem."""
    try:
        doc = json.loads(text)
    except json.JSONDecodeError as e:
        raise ConfigError(f"{name}: not JSON: {e}") from e
    try:
        return _rules(doc)
    except ConfigError as e:
        raise ConfigError(f"{name}: {e.message}") from e
    except (KeyError, TypeError, AttributeError) as e:
        raise ConfigError(f"{name}: missing or mistyped field ({type(e).__name__}: {e})") from e


def _rules(raw: object) -> CompatRules:
    doc = _object(raw, {"version", "sources", "ptx_isa_min_driver", "families"}, "document")
    if doc["version"] != SCHEMA_VERSION:
        raise ConfigError(f"version {doc['version']!r}, this reader reads {SCHEMA_VERSION}")
    raw_sources = _object(doc["sources"], None, "sources")
    sources = {k: _text(v, f"sources.{k}") for k, v in raw_sources.items()}
    isa = _object(doc["ptx_isa_min_driver"], {"source", "table", "series"}, "ptx_isa_min_driver")
    rows = _object(isa["table"], None, "ptx_isa_min_driver.table")
    table = {
        Version.parse(k): Version.parse(_text(v, k)) for k, v in sorted(rows.items(), key=_by_isa)
    }
    _increasing(table)
    if not isinstance(isa["series"], list):
        raise ConfigError("ptx_isa_min_driver.series: not a list")
    series = tuple(_series(s, sources, table) for s in isa["series"])
    fams = _object(doc["families"], {"source", "listed", "unlisted", "note"}, "families")
    families = {}
    for text, members in _object(fams["listed"], None, "families.listed").items():
        family = _family(text, members)
        families[family.target.number] = family
    try:
        unlisted = FamilyRule(fams["unlisted"])
    except ValueError as e:
        raise ConfigError(f"families.unlisted: unknown rule {fams['unlisted']!r}") from e
    return CompatRules(
        sources=MappingProxyType(sources),
        isa_table=MappingProxyType(table),
        isa_series=series,
        families=MappingProxyType(families),
        unlisted_family=unlisted,
        isa_source=_cited(isa["source"], sources),
        family_source=_cited(fams["source"], sources),
    )


def _object(obj: object, allowed: set[str] | None, where: str) -> dict[str, Any]:
    """``obj`` as a JSON object; only the ``allowed`` fields (when given)."""
    if not isinstance(obj, dict):
        raise ConfigError(f"{where}: not an object")
    unknown = set(obj) - allowed if allowed is not None else set()
    if unknown:
        raise ConfigError(f"{where}: unknown field(s) {', '.join(sorted(unknown))}")
    return obj


def _text(value: object, where: str) -> str:
    if not isinstance(value, str) or not value.strip():
        raise ConfigError(f"{where}: not a non-empty string")
    return value


def _cited(key: object, sources: Mapping[str, str]) -> str:
    if key not in sources:
        raise ConfigError(f"cites source {key!r}, which sources does not hold")
    return str(key)


def _by_isa(item: tuple[str, object]) -> tuple[int, int]:
    version = Version.parse(item[0])
    return version.major, version.minor


def _increasing(table: Mapping[Version, Version]) -> None:
    """A newer ISA never needs an older driver: rows out of order are a typo."""
    drivers = list(table.values())
    for (isa, older), newer in zip(table.items(), drivers[1:], strict=False):
        if newer < older:
            raise ConfigError(f"ptx_isa_min_driver: ISA after {isa} needs an older driver")


def _series(raw: object, sources: Mapping[str, str], table: Mapping[Version, Version]) -> IsaSeries:
    where = "ptx_isa_min_driver.series"
    obj = _object(raw, {"isa_major", "driver_major", "source", "note"}, where)
    isa_major, driver_major = obj["isa_major"], obj["driver_major"]
    if not all(isinstance(v, int) and 0 < v < 100 for v in (isa_major, driver_major)):
        raise ConfigError("ptx_isa_min_driver.series: majors must be small whole numbers")
    series = IsaSeries(isa_major, driver_major, _cited(obj["source"], sources))
    # The series must agree with every table row it covers, or it states a second rule.
    for isa, driver in table.items():
        if isa.major == isa_major and series.min_driver(isa) != driver:
            raise ConfigError(f"series for ISA {isa_major}.x disagrees with the row for {isa}")
    return series


def _family(text: str, members: object) -> Family:
    target = Target.parse(text)
    if target.virtual or target.variant is not Variant.FAMILY:
        raise ConfigError(f"families.listed: {text} is not an sm_XYf target")
    if not isinstance(members, list):
        raise ConfigError(f"families.listed: {text}: not a list of capabilities")
    caps = frozenset(Capability.parse(_text(m, text)) for m in members)
    # The documented rule bounds every listed family: same major, equal or higher minor.
    stray = sorted(str(c) for c in caps if c.major != target.major or c.minor < target.minor)
    if not caps or stray:
        raise ConfigError(f"families.listed: {text} lists {stray or 'no'} capabilities outside it")
    return Family(target, caps)
