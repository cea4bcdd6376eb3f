"""GPU targets and capabilities as values, and the compatibility rules between them.

Every rule lives here, once, and cites its source (the tables: ``compat.json``, loaded
and validated by :mod:`gate.reader.compat`):

* SASS for ``sm_XY`` runs on X.Z when the major is the same and Z >= Y.
* ``sm_XYa`` / ``compute_XYa`` run and JIT only on exactly X.Y.
* ``sm_XYf`` runs on the members of its family (same major, equal or higher minor).
* PTX for ``compute_XY`` JIT-compiles for any capability >= X.Y, across majors.
* A PTX ISA version needs a minimum driver CUDA version to be JIT-compiled at all.
"""

from __future__ import annotations

import enum
import re
from dataclasses import dataclass

from gate.errors import ConfigError

# ASCII digits only, and few of them: \d also matches other scripts' digits, and int()
# of a 5,000-digit string raises ValueError (CPython's digit limit) instead of an answer.
# A capability's minor is one digit: SM numbers are major * 10 + minor.
_VERSION_RE = re.compile(r"^([0-9]{1,4})\.([0-9]{1,4})$")
_TARGET_RE = re.compile(r"^(sm|compute|lto)_([0-9]{2,4})([af]?)$")
_CAP_RE = re.compile(r"^([0-9]{1,3})\.([0-9])$|^([0-9]{2,3})$")


@dataclass(frozen=True, order=True)
class Version:
    """A two-part version such as a driver's CUDA version (13.0) or a PTX ISA (9.0)."""

    major: int
    minor: int

    @classmethod
    def parse(cls, text: str) -> Version:
        """Parse ``"13.0"``; raise ConfigError on anything else."""
        match = _VERSION_RE.match(text.strip())
        if not match:
            raise ConfigError(f"not a MAJOR.MINOR version: {_clip(text)}")
        return cls(int(match.group(1)), int(match.group(2)))

    def __str__(self) -> str:
        return f"{self.major}.{self.minor}"


@dataclass(frozen=True, order=True)
class Capability:
    """A device's compute capability, such as 12.1 for GB10 or 9.0 for H200."""

    major: int
    minor: int

    @classmethod
    def parse(cls, text: str) -> Capability:
        """Parse ``"12.1"`` or the probe's ``"121"`` form."""
        match = _CAP_RE.match(text.strip())
        if not match:
            raise ConfigError(f"not a compute capability (like 12.1 or 121): {_clip(text)}")
        if match.group(3):
            number = int(match.group(3))
            return cls(number // 10, number % 10)
        return cls(int(match.group(1)), int(match.group(2)))

    @property
    def number(self) -> int:
        """The SM number: 121 for 12.1."""
        return self.major * 10 + self.minor

    def sm(self) -> Target:
        """The plain SASS target for this capability: ``sm_121`` for 12.1."""
        return Target(self.major, self.minor, Variant.NONE, virtual=False)

    def compute(self) -> Target:
        """The plain PTX target for this capability: ``compute_121`` for 12.1."""
        return Target(self.major, self.minor, Variant.NONE, virtual=True)

    def __str__(self) -> str:
        return f"{self.major}.{self.minor}"


class Variant(enum.Enum):
    """The feature-set suffix of a target."""

    NONE = ""
    ARCH = "a"  # architecture-specific: exactly one capability
    FAMILY = "f"  # family-specific: the members of one family


@dataclass(frozen=True)
class Target:
    """A code target: ``sm_90`` (SASS), ``compute_90`` (PTX), with an ``a``/``f`` variant."""

    major: int
    minor: int
    variant: Variant = Variant.NONE
    virtual: bool = False

    @classmethod
    def parse(cls, text: str) -> Target:
        """Parse ``sm_121``, ``sm_90a``, ``sm_120f``, ``compute_100f`` or ``lto_90``."""
        match = _TARGET_RE.match(text.strip())
        if not match:
            raise ConfigError(
                f"not a CUDA target (like sm_121, sm_90a, sm_120f, compute_90): {_clip(text)}"
            )
        number = int(match.group(2))
        if number < 10:
            raise ConfigError(f"not a CUDA target (SM number too small): {_clip(text)}")
        return cls(
            number // 10,
            number % 10,
            Variant(match.group(3)),
            virtual=match.group(1) == "compute",
        )

    @classmethod
    def from_number(cls, number: int, variant: Variant = Variant.NONE, *, virtual: bool) -> Target:
        """Build a target from an SM number such as 121, as binary headers store it."""
        return cls(number // 10, number % 10, variant, virtual=virtual)

    @property
    def number(self) -> int:
        """The SM number: 121 for sm_121a."""
        return self.major * 10 + self.minor

    @property
    def capability(self) -> Capability:
        """The capability this target is named after."""
        return Capability(self.major, self.minor)

    def as_sass(self) -> Target:
        """The same target as SASS (``sm_``)."""
        return Target(self.major, self.minor, self.variant, virtual=False)

    def as_ptx(self) -> Target:
        """The same target as PTX (``compute_``)."""
        return Target(self.major, self.minor, self.variant, virtual=True)

    def sass_runs_on(self, cap: Capability) -> bool:
        """Whether SASS for this target runs on a device of capability ``cap``."""
        if self.variant is Variant.ARCH:
            return cap == self.capability
        if self.variant is Variant.FAMILY:
            return cap in family_members(self)
        return cap.major == self.major and cap.minor >= self.minor

    def ptx_jits_for(self, cap: Capability) -> bool:
        """Whether PTX for this target can be JIT-compiled for capability ``cap``."""
        if self.variant is Variant.ARCH:
            return cap == self.capability
        if self.variant is Variant.FAMILY:
            return cap in family_members(self)
        return cap >= self.capability

    def __str__(self) -> str:
        prefix = "compute" if self.virtual else "sm"
        return f"{prefix}_{self.number}{self.variant.value}"


def _clip(text: str) -> str:
    """``text`` quoted for a one-line message, cut short when it is long."""
    return repr(text) if len(text) <= 40 else f"{text[:40]!r}... ({len(text)} characters)"


def parse_target_or_capability(text: str) -> Capability:
    """Accept ``sm_121``, ``compute_121``, ``12.1`` or ``121`` and return the capability."""
    stripped = text.strip()
    if _TARGET_RE.match(stripped):
        return Target.parse(stripped).capability
    return Capability.parse(stripped)


def family_members(target: Target) -> frozenset[Capability]:
    """Capabilities an ``f`` target serves (compat.json: listed, else its stated rule)."""
    from gate.reader.compat import rules  # noqa: PLC0415  (compat imports this module's types)

    return rules().family_members(target)


def min_driver_for_ptx(isa: Version) -> Version | None:
    """The oldest driver CUDA version that can JIT PTX of ISA ``isa``; None if unknown."""
    from gate.reader.compat import rules  # noqa: PLC0415  (compat imports this module's types)

    return rules().min_driver_for_ptx(isa)


class Path(enum.Enum):
    """How a kernel will get code on a device, best first."""

    EXACT_SASS = "exact SASS"
    COMPATIBLE_SASS = "compatible SASS"
    FAMILY_SASS = "family SASS"
    PTX_JIT = "PTX JIT"
    NONE = "nothing"

    @property
    def is_native(self) -> bool:
        """Whether the path runs SASS from the artifact, with no JIT involved."""
        return self in (Path.EXACT_SASS, Path.COMPATIBLE_SASS, Path.FAMILY_SASS)


@dataclass(frozen=True)
class Route:
    """The path a kernel takes on one device, with the target that serves it."""

    path: Path
    target: Target | None = None
    ptx_isa: Version | None = None
    min_driver: Version | None = None

    def describe(self) -> str:
        """Human text: ``exact SASS (sm_90)``, ``PTX JIT (compute_90, ISA 9.0, driver >= 13.0)``."""
        if self.target is None:
            return self.path.value
        if self.path is Path.PTX_JIT:
            extra = f", ISA {self.ptx_isa}" if self.ptx_isa else ""
            extra += f", driver >= {self.min_driver}" if self.min_driver else ""
            return f"{self.path.value} ({self.target}{extra})"
        return f"{self.path.value} ({self.target})"


def sass_route(sass_targets: tuple[Target, ...], cap: Capability) -> Route | None:
    """The best SASS among ``sass_targets`` for ``cap``, or None when none runs there."""
    usable = [t for t in sass_targets if t.sass_runs_on(cap)]
    if not usable:
        return None
    exact = [t for t in usable if t.number == cap.number]
    if exact:
        return Route(Path.EXACT_SASS, _prefer_plain(exact))
    # Ties (sm_100 and sm_100f on 10.3) go to the plain target, as exact matches do, so
    # the answer never depends on the order the entries came in.
    best = max(usable, key=lambda t: (t.minor, t.variant is Variant.NONE))
    path = Path.FAMILY_SASS if best.variant is Variant.FAMILY else Path.COMPATIBLE_SASS
    return Route(path, best)


def ptx_route(ptx: tuple[tuple[Target, Version | None], ...], cap: Capability) -> Route | None:
    """The newest PTX that JIT-compiles for ``cap``, with its minimum driver, or None."""
    usable = [(t, isa) for t, isa in ptx if t.ptx_jits_for(cap)]
    if not usable:
        return None
    target, isa = max(usable, key=_ptx_preference)
    return Route(Path.PTX_JIT, target, isa, min_driver_for_ptx(isa) if isa else None)


def _ptx_preference(item: tuple[Target, Version | None]) -> tuple[int, bool, bool, int]:
    """Newest target, a/f before plain; for one target, a known and then the oldest ISA
    (the one needing the oldest driver), so the answer never depends on entry order."""
    target, isa = item
    age = -(isa.major * 1000 + isa.minor) if isa else 0
    return target.number, target.variant is not Variant.NONE, isa is not None, age


def route(
    sass_targets: tuple[Target, ...],
    ptx: tuple[tuple[Target, Version | None], ...],
    cap: Capability,
) -> Route:
    """The path a kernel takes on ``cap``: compatible SASS first, else PTX JIT, else nothing."""
    return sass_route(sass_targets, cap) or ptx_route(ptx, cap) or Route(Path.NONE)


def _prefer_plain(targets: list[Target]) -> Target:
    plain = [t for t in targets if t.variant is Variant.NONE]
    return (plain or targets)[0]
