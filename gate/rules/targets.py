"""GPU targets and capabilities as values, and which devices each target's code serves.

The rules cite their sources (the tables: ``compat.json``, loaded and validated by
:mod:`gate.rules.compat`):

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
        return Target(self.major, self.minor)

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
        return Target(self.major, self.minor, self.variant)

    def as_ptx(self) -> Target:
        """The same target as PTX (``compute_``)."""
        return Target(self.major, self.minor, self.variant, virtual=True)

    def plain(self) -> Target:
        """The same target without its ``a``/``f`` variant: ``sm_90a`` -> ``sm_90``."""
        return Target(self.major, self.minor, virtual=self.virtual)

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
    return Capability.parse(_unambiguous(stripped))


def _unambiguous(text: str) -> str:
    """``text``, unless it is a bare number a person may mean two ways.

    ``13`` reads as the SM number of 1.3 but is typed for 13.0, and ``9`` for 9.0;
    ``90`` or ``121`` can only be 9.0 and 12.1 (no capability has a major of 90).
    """
    if re.fullmatch(r"[0-9]|1[0-9]", text):
        raise ConfigError(f"ambiguous compute capability {text!r}: write {text}.0 (or sm_{text}0)")
    return text


def parse_required_target(text: str) -> Target:
    """A target the user requires, as SASS: ``sm_90a`` keeps its variant; ``compute_121``,
    ``12.1`` and ``121`` all mean ``sm_121`` (a capability names its plain target)."""
    stripped = text.strip()
    if stripped.startswith(("sm_", "compute_", "lto_")):
        return Target.parse(stripped).as_sass()
    capability = _unambiguous(stripped)
    try:
        return Capability.parse(capability).sm()
    except ConfigError as e:
        raise ConfigError(
            f"not a CUDA target (like sm_121, sm_90a, sm_120f, 12.1 or 121): {_clip(text)}"
        ) from e
