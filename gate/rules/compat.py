"""The compatibility rules of ``compat.json`` as frozen records, validated once at load.

The way auditwheel loads its policies: the shipped JSON is parsed into typed records
(PTX ISA -> minimum driver rows, ISA series for minors newer than the table, family
targets and their members, the rule for a family the table does not list, the devices
of each capability and the hosts they ship on, and what satisfies each form of a
required target), every value checked and every source cited, and looked up by value,
never by string key. A file that does not validate is refused with one line; nothing
falls back in code. The rules that are stated twice (a family's members, and that a
family build satisfies a plain requirement) are checked against each other at load.
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
from gate.rules.targets import Capability, Target, Variant, Version

SCHEMA_VERSION = 3
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
class DeviceClass:
    """The devices of one compute capability: what they are, the hosts they ship on."""

    capability: Capability
    products: str
    hosts: frozenset[str]  # uname -m names: x86_64, aarch64


class Form(enum.Enum):
    """The form of a required target, which decides what satisfies it (compat.json)."""

    PLAIN = "plain"
    FAMILY = "family"
    ARCH = "arch"
    DEVICE = "device"  # the probed device's own requirement: code built for its capability

    @classmethod
    def of(cls, variant: Variant) -> Form:
        """The form a target of ``variant`` names."""
        return _FORM_OF[variant]


_FORM_OF = {Variant.NONE: Form.PLAIN, Variant.FAMILY: Form.FAMILY, Variant.ARCH: Form.ARCH}
_VARIANT_OF = {form.value: variant for variant, form in _FORM_OF.items()}


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
    devices: Mapping[Capability, DeviceClass]
    # (PTX?, required form) -> the variants of the same SM number that satisfy it
    satisfying: Mapping[tuple[bool, Form], frozenset[Variant]]

    def min_driver(self, isa: Version) -> Version | None:
        """The table's row for ``isa``, else its series' rule, else None (no known minimum)."""
        found = self.isa_table.get(isa)
        if found is not None:
            return found
        return next((d for s in self.isa_series if (d := s.min_driver(isa)) is not None), None)

    def family_members(self, target: Target) -> frozenset[Capability]:
        """Capabilities an ``f`` target serves: its listed members, else the unlisted rule's."""
        listed = self.families.get(target.number)
        return listed.members if listed is not None else self.unlisted_family.members(target)

    def has_family(self, number: int) -> bool:
        """Whether an ``f`` target exists for SM number ``number``: a listed family, or one
        newer than every listed family (CUDA 13.0 refuses ``sm_90f``: 9.0 has none)."""
        return number in self.families or number > max(self.families, default=0)

    def max_known_isa(self) -> Version:
        """The newest PTX ISA whose minimum driver the rules state (the series included)."""
        newest = max(self.isa_table)
        for series in self.isa_series:
            newest = max(newest, Version(series.isa_major, 9))
        return newest

    def max_known_driver(self) -> Version:
        """The newest driver CUDA version the ISA rules speak of."""
        newest = max(self.isa_table.values())
        for series in self.isa_series:
            newest = max(newest, Version(series.driver_major, 9))
        return newest

    def hosts_of(self, cap: Capability) -> frozenset[str]:
        """The hosts devices of ``cap`` ship on; empty when the table does not list it."""
        found = self.devices.get(cap)
        return found.hosts if found is not None else frozenset()

    def satisfies(self, *, ptx: bool, form: Form, variant: Variant) -> bool:
        """Whether code of ``variant`` (same SM number) satisfies a requirement of ``form``."""
        return variant in self.satisfying[ptx, form]


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
    doc = _object(
        raw,
        {"version", "sources", "ptx_isa_min_driver", "families", "devices", "requirements"},
        "document",
    )
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
    devs = _object(doc["devices"], {"source", "listed", "note"}, "devices")
    _cited(devs["source"], sources)
    devices = {}
    for text, info in _object(devs["listed"], None, "devices.listed").items():
        device = _device(text, info)
        devices[device.capability] = device
    reqs = _object(doc["requirements"], {"source", "sass", "ptx", "note"}, "requirements")
    _cited(reqs["source"], sources)
    satisfying = {
        (ptx, form): _variants(reqs[kind], form, f"requirements.{kind}")
        for ptx, kind in ((False, "sass"), (True, "ptx"))
        for form in Form
    }
    _family_covers_plain(satisfying, families, devices)
    return CompatRules(
        sources=MappingProxyType(sources),
        isa_table=MappingProxyType(table),
        isa_series=series,
        families=MappingProxyType(families),
        unlisted_family=unlisted,
        isa_source=_cited(isa["source"], sources),
        family_source=_cited(fams["source"], sources),
        devices=MappingProxyType(devices),
        satisfying=MappingProxyType(satisfying),
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


def _device(text: str, info: object) -> DeviceClass:
    cap = Capability.parse(text)
    obj = _object(info, {"products", "hosts"}, f"devices.listed.{text}")
    hosts = obj["hosts"]
    if not isinstance(hosts, list) or not hosts or not all(h in _HOSTS for h in hosts):
        raise ConfigError(f"devices.listed.{text}.hosts: a non-empty list of {sorted(_HOSTS)}")
    return DeviceClass(cap, _text(obj["products"], f"devices.listed.{text}"), frozenset(hosts))


_HOSTS = frozenset({"x86_64", "aarch64", "ppc64le"})


def _variants(table: object, form: Form, where: str) -> frozenset[Variant]:
    obj = _object(table, {f.value for f in Form}, where)
    given = obj.get(form.value)
    if not isinstance(given, list) or not given or not all(v in _VARIANT_OF for v in given):
        raise ConfigError(f"{where}.{form.value}: a non-empty list of {sorted(_VARIANT_OF)}")
    variants = frozenset(_VARIANT_OF[v] for v in given)
    # A requirement is always met by code of its own form; the device's by the plain build.
    own = Variant.NONE if form is Form.DEVICE else _VARIANT_OF[form.value]
    if own not in variants:
        raise ConfigError(
            f"{where}.{form.value}: must accept its own form ({own.value or 'plain'})"
        )
    return variants


def _family_covers_plain(
    satisfying: Mapping[tuple[bool, Form], frozenset[Variant]],
    families: Mapping[int, Family],
    devices: Mapping[Capability, DeviceClass],
) -> None:
    """A family build may stand for a plain target only where the family serves every
    listed device the plain build runs on (the two tables must agree)."""
    if Variant.FAMILY not in satisfying[False, Form.PLAIN]:
        return
    for family in families.values():
        plain = family.target.plain()
        served = {cap for cap in devices if plain.sass_runs_on(cap)}
        missing = sorted(str(c) for c in served - family.members)
        if missing:
            raise ConfigError(
                f"requirements.sass.plain accepts {family.target} for {plain}, but the family "
                f"does not serve {', '.join(missing)}"
            )
