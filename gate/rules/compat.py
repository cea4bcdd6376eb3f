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
from dataclasses import dataclass, field
from functools import cache
from itertools import pairwise
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
    # Tile IR bytecode version -> the oldest driver that compiles it (empty: none known)
    tile_table: Mapping[Version, Version] = field(default_factory=lambda: MappingProxyType({}))
    tile_source: str = ""

    def tile_min_driver(self, version: Version) -> Version | None:
        """The oldest driver that compiles Tile IR bytecode ``version``; None: no rule says."""
        return self.tile_table.get(version)

    def first_tile_driver(self) -> Version | None:
        """The first driver with any Tile IR support (None: the table is empty)."""
        return min(self.tile_table.values(), default=None)

    def min_driver(self, isa: Version) -> Version | None:
        """The table's row for ``isa``, else its series' rule, else None (no known minimum)."""
        found = self.isa_table.get(isa)
        if found is not None:
            return found
        return next((d for s in self.isa_series if (d := s.min_driver(isa)) is not None), None)

    def sass_runs_on(self, target: Target, cap: Capability) -> bool:
        """Whether SASS for ``target`` runs on a device of capability ``cap``."""
        if target.variant is Variant.ARCH:
            return cap == target.capability
        if target.variant is Variant.FAMILY:
            return cap in self.family_members(target)
        return _plain_sass_runs_on(target, cap)

    def ptx_jits_for(self, target: Target, cap: Capability) -> bool:
        """Whether PTX for ``target`` can be JIT-compiled for capability ``cap``."""
        if target.variant is Variant.ARCH:
            return cap == target.capability
        if target.variant is Variant.FAMILY:
            return cap in self.family_members(target)
        return cap >= target.capability

    def family_members(self, target: Target) -> frozenset[Capability]:
        """Capabilities an ``f`` target serves: its listed members, else the unlisted rule's."""
        listed = self.families.get(target.number)
        return listed.members if listed is not None else self.unlisted_family.members(target)

    def has_family(self, number: int) -> bool:
        """Whether an ``f`` target exists for SM number ``number``: a listed family, or one
        newer than every listed family (CUDA 13.0 refuses ``sm_90f``: 9.0 has none)."""
        return number in self.families or number > max(self.families)

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

    def device_class(self, cap: Capability) -> DeviceClass | None:
        """The devices of ``cap`` as the table lists them (products, hosts), or None."""
        return self.devices.get(cap)

    def satisfies(self, *, ptx: bool, form: Form, variant: Variant) -> bool:
        """Whether code of ``variant`` (same SM number) satisfies a requirement of ``form``."""
        return variant in self.satisfying[ptx, form]


@cache
def rules() -> CompatRules:
    """The shipped rules, loaded and validated once per process."""
    return load(DATA.read_text(encoding="utf-8"), str(DATA.name))


def sass_runs_on(target: Target, cap: Capability) -> bool:
    """Whether SASS for ``target`` runs on capability ``cap`` (the shipped rules)."""
    return rules().sass_runs_on(target, cap)


def ptx_jits_for(target: Target, cap: Capability) -> bool:
    """Whether PTX for ``target`` JIT-compiles for capability ``cap`` (the shipped rules)."""
    return rules().ptx_jits_for(target, cap)


def family_members(target: Target) -> frozenset[Capability]:
    """Capabilities an ``f`` target serves (the shipped rules: listed, else the stated rule)."""
    return rules().family_members(target)


def _plain_sass_runs_on(target: Target, cap: Capability) -> bool:
    """A plain target's SASS runs on its own major's capabilities at or above its minor."""
    return cap.major == target.major and cap.minor >= target.minor


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


_TOP = frozenset(
    {
        "version",
        "sources",
        "ptx_isa_min_driver",
        "tileir_min_driver",
        "families",
        "devices",
        "requirements",
    }
)
_HOSTS = frozenset({"x86_64", "aarch64", "ppc64le"})


@dataclass(frozen=True)
class _Node:
    """One value of the document and where it is in it (``families.listed.sm_120f``):
    every problem is raised through it, so each message names its place."""

    value: object
    where: str = ""

    def fail(self, problem: str) -> ConfigError:
        return ConfigError(f"{self.where or 'document'}: {problem}")

    def fields(self, allowed: frozenset[str] | None = None) -> dict[str, _Node]:
        """The object's fields (only ``allowed`` ones, when given), each a node."""
        if not isinstance(self.value, dict):
            raise self.fail("not an object")
        unknown = sorted(set(self.value) - allowed) if allowed is not None else []
        if unknown:
            raise self.fail(f"unknown field(s) {', '.join(unknown)}")
        return {
            k: _Node(v, f"{self.where}.{k}" if self.where else k) for k, v in self.value.items()
        }

    def elements(self) -> list[_Node]:
        """The list's elements, each a node."""
        if not isinstance(self.value, list):
            raise self.fail("not a list")
        return [_Node(v, f"{self.where}[{i}]") for i, v in enumerate(self.value)]

    def text(self) -> str:
        if not isinstance(self.value, str) or not self.value.strip():
            raise self.fail("not a non-empty string")
        return self.value

    def cited(self, sources: Mapping[str, str]) -> str:
        """A source's key, which ``sources`` must hold."""
        key = self.text()
        if key not in sources:
            raise self.fail(f"cites source {key!r}, which sources does not hold")
        return key

    def parsed(self, kind: type[Version] | type[Capability] | type[Target]) -> Any:  # noqa: ANN401
        """The text parsed as a version, capability or target (ConfigError naming the place)."""
        text = self.text()
        try:
            return kind.parse(text)
        except ConfigError as e:
            raise self.fail(e.message) from e


def _rules(raw: object) -> CompatRules:
    doc = _Node(raw).fields(_TOP)
    if doc["version"].value != SCHEMA_VERSION:
        raise ConfigError(f"version {doc['version'].value!r}, this reader reads {SCHEMA_VERSION}")
    sources = {k: node.text() for k, node in doc["sources"].fields().items()}
    isa = doc["ptx_isa_min_driver"].fields(frozenset({"source", "table", "series"}))
    rows = isa["table"].fields()
    table = dict(
        sorted(
            (_Node(k, f"{n.where} key").parsed(Version), n.parsed(Version)) for k, n in rows.items()
        )
    )
    _increasing(table)
    series = tuple(_series(s, sources, table) for s in isa["series"].elements())
    fams = doc["families"].fields(frozenset({"source", "listed", "unlisted", "note"}))
    families = {}
    for text, members in fams["listed"].fields().items():
        family = _family(text, members)
        families[family.target.number] = family
    if not families:
        raise fams["listed"].fail("lists no family")
    try:
        unlisted = FamilyRule(fams["unlisted"].text())
    except ValueError as e:
        raise fams["unlisted"].fail(f"unknown rule {fams['unlisted'].value!r}") from e
    devs = doc["devices"].fields(frozenset({"source", "listed", "note"}))
    devs["source"].cited(sources)
    devices = {}
    for text, info in devs["listed"].fields().items():
        device = _device(text, info)
        devices[device.capability] = device
    reqs = doc["requirements"].fields(frozenset({"source", "sass", "ptx", "note"}))
    reqs["source"].cited(sources)
    satisfying = {
        (ptx, form): _variants(reqs[kind], form)
        for ptx, kind in ((False, "sass"), (True, "ptx"))
        for form in Form
    }
    _family_covers_plain(satisfying, families, devices)
    tile_table, tile_source = _tile_table(doc.get("tileir_min_driver"), sources)
    return CompatRules(
        sources=MappingProxyType(sources),
        isa_table=MappingProxyType(table),
        isa_series=series,
        families=MappingProxyType(families),
        unlisted_family=unlisted,
        isa_source=isa["source"].cited(sources),
        family_source=fams["source"].cited(sources),
        devices=MappingProxyType(devices),
        satisfying=MappingProxyType(satisfying),
        tile_table=MappingProxyType(tile_table),
        tile_source=tile_source,
    )


def _tile_table(
    node: _Node | None, sources: Mapping[str, str]
) -> tuple[dict[Version, Version], str]:
    """The Tile IR bytecode version -> minimum driver table, with its source (none: empty)."""
    if node is None:
        return {}, ""
    fields = node.fields(frozenset({"source", "table", "note"}))
    rows = fields["table"].fields()
    table = dict(
        sorted(
            (_Node(k, f"{n.where} key").parsed(Version), n.parsed(Version)) for k, n in rows.items()
        )
    )
    for (_, older), (version, newer) in pairwise(table.items()):
        if newer < older:
            raise fields["table"].fail(f"Tile IR {version} needs an older driver")
    return table, fields["source"].cited(sources)


def _increasing(table: Mapping[Version, Version]) -> None:
    """A newer ISA never needs an older driver: rows out of order are a typo."""
    for (_, older), (isa, newer) in pairwise(table.items()):
        if newer < older:
            raise ConfigError(f"ptx_isa_min_driver.table: ISA {isa} needs an older driver")


def _series(node: _Node, sources: Mapping[str, str], table: Mapping[Version, Version]) -> IsaSeries:
    obj = node.fields(frozenset({"isa_major", "driver_major", "source", "note"}))
    isa_major, driver_major = obj["isa_major"].value, obj["driver_major"].value
    if not (type(isa_major) is int and type(driver_major) is int):
        raise node.fail("majors must be whole numbers")
    if not (0 < isa_major < 100 and 0 < driver_major < 100):
        raise node.fail("majors must be from 1 to 99")
    series = IsaSeries(isa_major, driver_major, obj["source"].cited(sources))
    # The series must agree with every table row it covers, or it states a second rule.
    for isa, driver in table.items():
        if series.min_driver(isa) not in (None, driver):
            raise node.fail(f"disagrees with the row for {isa}")
    return series


def _family(text: str, members: _Node) -> Family:
    target = _Node(text, members.where).parsed(Target)
    if target.virtual or target.variant is not Variant.FAMILY:
        raise members.fail("not an sm_XYf target")
    caps = frozenset(m.parsed(Capability) for m in members.elements())
    # The documented rule bounds every listed family: same major, equal or higher minor.
    bounds = FamilyRule.SAME_MAJOR_AT_OR_ABOVE.members(target)
    stray = sorted(str(c) for c in caps - bounds)
    if stray:
        raise members.fail(f"lists capabilities outside the family: {', '.join(stray)}")
    if not caps:
        raise members.fail("lists no capability")
    return Family(target, caps)


def _device(text: str, info: _Node) -> DeviceClass:
    cap = _Node(text, info.where).parsed(Capability)
    obj = info.fields(frozenset({"products", "hosts"}))
    hosts = [h.text() for h in obj["hosts"].elements()]
    if not hosts or not set(hosts) <= _HOSTS:
        raise obj["hosts"].fail(f"a non-empty list of {', '.join(sorted(_HOSTS))}")
    return DeviceClass(cap, obj["products"].text(), frozenset(hosts))


def _variants(node: _Node, form: Form) -> frozenset[Variant]:
    given = node.fields(frozenset(f.value for f in Form))[form.value]
    names = [v.text() for v in given.elements()]
    if not names or not set(names) <= set(_VARIANT_OF):
        raise given.fail(f"a non-empty list of {', '.join(sorted(_VARIANT_OF))}")
    variants = frozenset(_VARIANT_OF[v] for v in names)
    # A requirement is always met by code of its own form; the device's by the plain build.
    own = Variant.NONE if form is Form.DEVICE else _VARIANT_OF[form.value]
    if own not in variants:
        raise given.fail(f"must accept its own form, {_FORM_OF[own].value}")
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
        served = {cap for cap in devices if _plain_sass_runs_on(plain, cap)}
        missing = sorted(str(c) for c in served - family.members)
        if missing:
            raise ConfigError(
                f"requirements.sass.plain accepts {family.target} for {plain}, but the family "
                f"does not serve {', '.join(missing)}"
            )
