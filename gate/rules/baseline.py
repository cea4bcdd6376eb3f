"""What counts as a regression against a baseline run: the rules of ``cuda-gate diff``.

A release is compared with the last good one artifact by artifact (matched by name).
What a user ships broken without noticing is something *lost*: a target, a kernel, a
device's native route, Tile IR, or a PTX ISA (or Tile IR bytecode version) that now needs
a newer driver. Each of those is a
:class:`Rule` whose :class:`Severity` the configuration may lower (``[baseline]``);
by default every rule fails. Additions and size changes are reported, never judged.

The rules read :class:`CodeFacts` (an artifact's SASS and PTX entries, per target:
kernels, PTX ISA, bytes; its Tile IR, which has no target, as one :class:`TileCode`),
built by the caller from a run record; nothing here reads a file.
"""

from __future__ import annotations

import enum
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from gate.errors import ConfigError
from gate.rules.causes import Cause
from gate.rules.compat import CompatRules, rules
from gate.rules.kernels import readable
from gate.rules.routes import Route, min_driver, route
from gate.rules.targets import Capability, Target, Version
from gate.rules.verdict import Check, CheckState


class Rule(enum.Enum):
    """A kind of loss; the value is its ``[baseline]`` configuration key."""

    DROPPED_ARTIFACT = "dropped_artifact"
    DROPPED_TARGET = "dropped_target"
    DROPPED_KERNEL = "dropped_kernel"
    LOST_NATIVE_ROUTE = "lost_native_route"
    NEWER_DRIVER = "newer_driver"  # the PTX ISA (or Tile IR bytecode) now needs a newer driver


# Why a check of a run against its baseline failed: the cause its losses rank by.
CAUSES = {
    Rule.DROPPED_ARTIFACT: Cause.EVIDENCE,
    Rule.DROPPED_TARGET: Cause.WRONG_TARGET,
    Rule.DROPPED_KERNEL: Cause.MISSING_KERNEL,
    Rule.LOST_NATIVE_ROUTE: Cause.MISSING_SASS,
    Rule.NEWER_DRIVER: Cause.PTX_NEEDS_DRIVER,
}
CLASSNAME = "gate.baseline"
_SHOWN = 5  # losses a check's message names; the comparison in result.json holds all


class Severity(enum.Enum):
    """What a loss does to the verdict."""

    FAIL = "fail"
    WARN = "warn"


class Level(enum.Enum):
    """How one change reads: a failing or warned loss, or a change only reported."""

    FAIL = "fail"
    WARN = "warn"
    INFO = "info"


@dataclass(frozen=True)
class Policy:
    """The severity of each rule (every rule fails unless the configuration says warn)."""

    warned: frozenset[Rule] = frozenset()

    def level(self, rule: Rule) -> Level:
        """The level a loss under ``rule`` gets."""
        return Level.WARN if rule in self.warned else Level.FAIL

    @classmethod
    def from_mapping(cls, table: Mapping[str, object], where: str) -> Policy:
        """The ``[baseline]`` table: ``rule = "fail" | "warn"``; ConfigError naming ``where``."""
        warned = set()
        for key, value in table.items():
            try:
                rule = Rule(key)
            except ValueError as e:
                known = ", ".join(r.value for r in Rule)
                raise ConfigError(f"{where}: [baseline] {key!r} is no rule ({known})") from e
            if value not in ("fail", "warn"):
                raise ConfigError(f'{where}: [baseline] {key} must be "fail" or "warn"')
            if Severity(value) is Severity.WARN:
                warned.add(rule)
        return cls(frozenset(warned))


@dataclass(frozen=True)
class TargetCode:
    """One target of an artifact: SASS or PTX, its kernels, its PTX ISA, its bytes."""

    ptx: bool
    target: Target
    kernels: frozenset[str] = frozenset()
    ptx_isa: Version | None = None
    size: int | None = None  # None: the record does not say (result.json before version 4)

    @property
    def label(self) -> str:
        """``sm_121`` or ``compute_121``."""
        return str(self.target.as_ptx() if self.ptx else self.target.as_sass())


TILE_LABEL = "Tile IR"


@dataclass(frozen=True)
class TileCode:
    """An artifact's Tile IR, every entry's together (Tile IR is architecture-independent:
    no target to tell entries apart by): its kernels, its newest bytecode version, its
    bytes."""

    kernels: frozenset[str] = frozenset()
    version: Version | None = None  # None: no entry's version was read
    size: int | None = None  # None: the record does not say

    @property
    def label(self) -> str:
        """``Tile IR``, as a lost or gained kernel's list of places names it."""
        return TILE_LABEL


@dataclass(frozen=True)
class CodeFacts:
    """What one artifact carries, as the rules compare it."""

    name: str
    targets: tuple[TargetCode, ...]
    tile: TileCode | None = None  # None: no Tile IR

    def by_label(self) -> dict[str, TargetCode]:
        """Each target by its label."""
        return {t.label: t for t in self.targets}

    def labels(self, *, ptx: bool) -> tuple[str, ...]:
        """The SASS (or PTX) targets, by SM number (``sm_90`` before ``sm_121``)."""
        mine = sorted((t for t in self.targets if t.ptx is ptx), key=lambda t: _order(t.target))
        return tuple(t.label for t in mine)

    def size(self) -> int | None:
        """Bytes of device code in all (Tile IR's too), None when some size is unknown."""
        sizes = [t.size for t in self.targets] + ([self.tile.size] if self.tile else [])
        return None if None in sizes else sum(s for s in sizes if s is not None)

    def newest_isa(self) -> Version | None:
        """The newest PTX ISA among its PTX targets."""
        return max((t.ptx_isa for t in self.targets if t.ptx and t.ptx_isa), default=None)

    def route(self, cap: Capability) -> Route:
        """How the device gets code from this artifact (any kernel: the artifact as a whole)."""
        sass = tuple(t.target for t in self.targets if not t.ptx)
        ptx = tuple((t.target, t.ptx_isa) for t in self.targets if t.ptx)
        tile = (self.tile.version,) if self.tile else ()
        return route(sass, ptx, cap, tile)


@dataclass(frozen=True)
class Change:
    """One difference between the baseline and the run; ``rule`` None: reported only.

    ``what`` says it to a person (a kernel by its demangled name); ``kernel`` is the
    symbol of the kernel it is about, the identity scripts compare.
    """

    artifact: str
    level: Level
    what: str
    rule: Rule | None = None
    kernel: str | None = None


@dataclass(frozen=True)
class Row:
    """One line of the before / after / change table."""

    artifact: str
    quantity: str
    before: str
    after: str
    change: str


@dataclass(frozen=True)
class Diff:
    """Every row and change of one comparison."""

    rows: tuple[Row, ...]
    changes: tuple[Change, ...]

    @property
    def failed(self) -> tuple[Change, ...]:
        """The losses that fail."""
        return tuple(c for c in self.changes if c.level is Level.FAIL)

    @property
    def warned(self) -> tuple[Change, ...]:
        """The losses configured to warn."""
        return tuple(c for c in self.changes if c.level is Level.WARN)


def compare(
    old: Iterable[CodeFacts],
    new: Iterable[CodeFacts],
    policy: Policy = Policy(),
    devices: Iterable[Capability] = (),
) -> Diff:
    """Compare each artifact of ``old`` with the one of the same name in ``new``.

    Routes are compared on ``devices`` and on every device a baseline target was built
    for (its SASS or PTX target's own capability).
    """
    before = {a.name: a for a in old}
    after = {a.name: a for a in new}
    rows: list[Row] = []
    changes: list[Change] = []
    for name, was in before.items():
        now = after.get(name)
        if now is None:
            changes.append(
                Change(
                    name,
                    policy.level(Rule.DROPPED_ARTIFACT),
                    "artifact dropped",
                    Rule.DROPPED_ARTIFACT,
                )
            )
            rows.append(Row(name, "artifact", "present", "absent", "dropped"))
            continue
        r, c = _artifact(was, now, policy, tuple(devices))
        rows += r
        changes += c
    for name in after.keys() - before.keys():
        changes.append(Change(name, Level.INFO, "artifact added"))
        rows.append(Row(name, "artifact", "absent", "present", "added"))
    return Diff(tuple(rows), tuple(changes))


def _artifact(
    was: CodeFacts, now: CodeFacts, policy: Policy, devices: tuple[Capability, ...]
) -> tuple[list[Row], list[Change]]:
    name = was.name
    rows: list[Row] = []
    changes: list[Change] = []
    for ptx, quantity in ((False, "SASS targets"), (True, "PTX targets")):
        old_t, new_t = was.labels(ptx=ptx), now.labels(ptx=ptx)
        rows.append(Row(name, quantity, _list(old_t), _list(new_t), _set_change(old_t, new_t)))
        for label in _only_in(old_t, new_t):
            level = policy.level(Rule.DROPPED_TARGET)
            changes.append(Change(name, level, f"{label} dropped", Rule.DROPPED_TARGET))
        changes += [Change(name, Level.INFO, f"{t} added") for t in _only_in(new_t, old_t)]
    r, c = _tile(was, now, policy)
    rows += r
    changes += c
    old_by, new_by = was.by_label(), now.by_label()
    ordered = (*was.labels(ptx=False), *was.labels(ptx=True))  # by SM number, SASS first
    both: list[tuple[_Code, _Code]] = [(old_by[t], new_by[t]) for t in ordered if t in new_by]
    if was.tile and now.tile:
        both.append((was.tile, now.tile))
    changes += _kernels(name, both, policy)
    for old_code, new_code in both:
        r, c = _target(name, old_code, new_code)
        rows += r
        changes += c
    rows.append(_size_row(name, "device code bytes", was.size(), now.size()))
    r, c = _isa(was, now, policy)
    rows += r
    changes += c
    wanted = {t.target.capability for t in was.targets} | set(devices)
    for cap in sorted(wanted, key=lambda c: (c.major, c.minor)):
        r, c = _device(name, cap, was.route(cap), now.route(cap), policy)
        rows += r
        changes += c
    return rows, changes


_Code = TargetCode | TileCode  # what holds kernels and bytes: a target, or the Tile IR


def _kernels(name: str, both: list[tuple[_Code, _Code]], policy: Policy) -> list[Change]:
    """One change per kernel lost (or gained), naming every target it left (or joined):
    a kernel dropped from the source is one regression, however many targets held it.

    Kernels are named as a person reads them, told apart among every kernel of the
    artifact in either run (:func:`gate.rules.kernels.readable`).
    """
    lost: dict[str, list[str]] = {}
    gained: dict[str, list[str]] = {}
    for was, now in both:
        for k in sorted(was.kernels - now.kernels):
            lost.setdefault(k, []).append(was.label)
        for k in sorted(now.kernels - was.kernels):
            gained.setdefault(k, []).append(was.label)
    names = readable(k for was, now in both for k in was.kernels | now.kernels)
    level = policy.level(Rule.DROPPED_KERNEL)
    changes = [
        Change(name, level, f"lost kernel {names[k]} from {', '.join(ts)}", Rule.DROPPED_KERNEL, k)
        for k, ts in sorted(lost.items(), key=lambda kv: (names[kv[0]], kv[0]))
    ]
    changes += [
        Change(name, Level.INFO, f"gained kernel {names[k]} in {', '.join(ts)}", kernel=k)
        for k, ts in sorted(gained.items(), key=lambda kv: (names[kv[0]], kv[0]))
    ]
    return changes


def _target(name: str, was: _Code, now: _Code) -> tuple[list[Row], list[Change]]:
    """The kernel count and the bytes of one target (or the Tile IR) both runs carry."""
    rows, changes = [], []
    if was.kernels != now.kernels:
        rows.append(
            Row(
                name,
                f"{was.label} kernels",
                str(len(was.kernels)),
                str(len(now.kernels)),
                _set_change(tuple(was.kernels), tuple(now.kernels), counts=True),
            )
        )
    if was.size != now.size and was.size is not None and now.size is not None:
        rows.append(_size_row(name, f"{was.label} bytes", was.size, now.size))
        changes.append(Change(name, Level.INFO, f"{was.label} {_delta(was.size, now.size)}"))
    return rows, changes


def _isa(was: CodeFacts, now: CodeFacts, policy: Policy) -> tuple[list[Row], list[Change]]:
    """The newest PTX ISA, and whether the driver it needs went up."""
    old, new = was.newest_isa(), now.newest_isa()
    if old is None or new is None:
        return [], []  # no PTX on one side: the PTX target rows say so
    row = Row(was.name, "PTX ISA", str(old), str(new), "-" if old == new else f"{old} -> {new}")
    if not needs_newer_driver(old, new):
        info = [] if old == new else [Change(was.name, Level.INFO, f"PTX ISA {old} -> {new}")]
        return [row], info
    need = min_driver(new)
    after = f"driver >= {need}" if need else "a driver newer than every known one"
    what = f"PTX ISA {old} -> {new} needs {after}"
    return [row], [Change(was.name, policy.level(Rule.NEWER_DRIVER), what, Rule.NEWER_DRIVER)]


def _tile(was: CodeFacts, now: CodeFacts, policy: Policy) -> tuple[list[Row], list[Change]]:
    """The Tile IR, where either run has it: lost (a loss, as a PTX target is), added
    (reported), or its bytecode version changed, and whether the driver it needs went up."""
    old, new = was.tile, now.tile
    if old is None and new is None:
        return [], []
    name = was.name
    before, after = _version(old), _version(new)
    if new is None:
        lost = Change(name, policy.level(Rule.DROPPED_TARGET), f"{TILE_LABEL} dropped",
                      Rule.DROPPED_TARGET)  # fmt: skip
        return [Row(name, TILE_LABEL, before, after, "dropped")], [lost]
    if old is None:
        added = Change(name, Level.INFO, f"{TILE_LABEL} added")
        return [Row(name, TILE_LABEL, before, after, "added")], [added]
    row = Row(name, TILE_LABEL, before, after, "-" if before == after else f"{before} -> {after}")
    if old.version is None or new.version is None or old.version == new.version:
        return [row], []
    moved = f"{TILE_LABEL} bytecode {old.version} -> {new.version}"
    if not tile_needs_newer_driver(old.version, new.version):
        return [row], [Change(name, Level.INFO, moved)]
    need = rules().tile_min_driver(new.version)
    what = f"{moved} needs {f'driver >= {need}' if need else 'a driver newer than every known one'}"
    return [row], [Change(name, policy.level(Rule.NEWER_DRIVER), what, Rule.NEWER_DRIVER)]


def _version(tile: TileCode | None) -> str:
    """A Tile IR row's cell: ``13.4``, ``version unknown``, or ``none`` without Tile IR."""
    if tile is None:
        return "none"
    return "version unknown" if tile.version is None else str(tile.version)


def tile_needs_newer_driver(old: Version, new: Version, known: CompatRules | None = None) -> bool:
    """Whether Tile IR bytecode ``new`` needs a newer driver than bytecode ``old``
    (``known``'s ``tileir_min_driver``, the shipped rules by default), as
    :func:`needs_newer_driver` says for PTX: a version newer than every rule needs a driver
    newer than every known one; a version older than every rule makes no claim."""
    if new <= old:
        return False
    known = known or rules()
    old_need, new_need = known.tile_min_driver(old), known.tile_min_driver(new)
    if new_need is None:
        return new > max(known.tile_table, default=new)
    return old_need is not None and new_need > old_need


def needs_newer_driver(old: Version, new: Version) -> bool:
    """Whether PTX of ISA ``new`` needs a newer driver than PTX of ISA ``old``.

    An ISA newer than every rule (``compat.json``) needs a driver newer than every known
    one; an ISA older than every rule makes no claim.
    """
    if new <= old:
        return False
    old_need, new_need = min_driver(old), min_driver(new)
    if new_need is None:
        return new > rules().max_known_isa()
    return old_need is not None and new_need > old_need


def _device(
    name: str, cap: Capability, was: Route, now: Route, policy: Policy
) -> tuple[list[Row], list[Change]]:
    before, after = was.describe(), now.describe()
    row = Row(name, f"route on {cap}", before, after, "-" if before == after else "changed")
    if was.path.is_native and not now.path.is_native:
        level = policy.level(Rule.LOST_NATIVE_ROUTE)
        what = f"device {cap} lost its native route: {before} -> {after}"
        return [row], [Change(name, level, what, Rule.LOST_NATIVE_ROUTE)]
    if before != after:
        return [row], [Change(name, Level.INFO, f"device {cap}: {before} -> {after}")]
    return [row], []


def _order(target: Target) -> tuple[int, str]:
    return (target.number, target.variant.value)


def _list(items: tuple[str, ...]) -> str:
    return ", ".join(items) or "none"


def _only_in(these: tuple[str, ...], those: tuple[str, ...]) -> list[str]:
    """What ``these`` hold and ``those`` do not, in the order of ``these``."""
    other = set(those)
    return [t for t in dict.fromkeys(these) if t not in other]


def _set_change(old: tuple[str, ...], new: tuple[str, ...], *, counts: bool = False) -> str:
    """``-sm_90 -sm_121 +sm_100`` in the order the two lists give (targets by SM number),
    or ``-1 +2`` with ``counts``; ``-`` when equal."""
    lost = _only_in(old, new)
    gained = _only_in(new, old)
    if counts:
        parts = [f"-{len(lost)}" if lost else "", f"+{len(gained)}" if gained else ""]
    else:
        parts = [" ".join(f"-{t}" for t in lost), " ".join(f"+{t}" for t in gained)]
    return " ".join(p for p in parts if p) or "-"


def _size_row(name: str, quantity: str, old: int | None, new: int | None) -> Row:
    shown = [("unknown" if n is None else str(n)) for n in (old, new)]
    change = "-" if old == new else ("unknown" if old is None or new is None else _delta(old, new))
    return Row(name, quantity, shown[0], shown[1], change)


def _delta(old: int, new: int) -> str:
    """``+1200 bytes (+3.4%)``, ``-80 bytes (-100.0%)``; ``unchanged``."""
    if old == new:
        return "unchanged"
    percent = f" ({(new - old) / old * 100:+.1f}%)" if old else ""
    return f"{new - old:+d} bytes{percent}"


def checks(diff: Diff, against: str) -> tuple[Check, ...]:
    """One check per artifact of the baseline: passed when it lost nothing, warned when
    its losses only warn, failed with the first failing loss's cause otherwise."""
    names = list(dict.fromkeys(r.artifact for r in diff.rows))
    found = []
    for name in names:
        lost = [c for c in diff.changes if c.artifact == name and c.level is not Level.INFO]
        failing = [c for c in lost if c.level is Level.FAIL]
        title = f"{name}: compared with the baseline"
        if not lost:
            found.append(
                Check(title, CLASSNAME, CheckState.PASSED, f"nothing lost against {against}")
            )
            continue
        shown = "; ".join(c.what for c in lost[:_SHOWN])
        more = f"; and {len(lost) - _SHOWN} more" if len(lost) > _SHOWN else ""
        message = f"lost against {against}: {shown}{more}"
        if not failing:
            found.append(Check(title, CLASSNAME, CheckState.WARNED, message))
            continue
        first = min((c.rule for c in failing if c.rule), key=lambda r: list(Rule).index(r))
        found.append(Check(title, CLASSNAME, CheckState.FAILED, message, cause=CAUSES[first]))
    return tuple(found)
