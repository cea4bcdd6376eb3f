"""A requirements lock read as pip reads it, for the environment being audited.

A lock (``pip-compile``, ``uv pip compile [--universal]``, ``pip freeze``) pins each
distribution with ``name==version``, possibly under an environment marker
(``; platform_machine == 'aarch64'``) and with ``--hash=sha256:...`` options on the same
or on continuation lines. Here:

1. the lines are joined at ``\\`` and cut at comments, as pip does;
2. each requirement is parsed by ``packaging`` (PEP 508), its marker evaluated for the
   :class:`Target` (the platform, machine and Python being audited, not necessarily the
   machine running the gate: a DGX Spark lock audited on an x86-64 runner);
3. each pin that applies is matched to a wheel beside the lock by its file name's name
   and version (``Version`` equality: ``==1.0`` takes ``1.0.0``), a wheel whose tags
   install there preferred;
4. the wheel's digest is checked against the pin's hashes (pip's hash-checking mode);
   a wheel whose tags install nowhere in the target is kept, with a warning.
"""

from __future__ import annotations

import hashlib
import platform as host
import re
import sys
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path

from packaging import tags
from packaging.markers import (
    InvalidMarker,
    UndefinedComparison,
    UndefinedEnvironmentName,
    default_environment,
)
from packaging.requirements import InvalidRequirement, Requirement
from packaging.utils import InvalidWheelFilename, canonicalize_name, parse_wheel_filename
from packaging.version import InvalidVersion, Version

from gate.reader.artifacts import shown

# pip's comment: a '#' at the start of a line or after whitespace (a URL's fragment stays).
_COMMENT = re.compile(r"(^|\s+)#.*$")
_HASH = re.compile(r"--hash[=\s]+([A-Za-z0-9]+):([0-9A-Fa-f]+)")
_ALGORITHMS = frozenset({"sha256", "sha384", "sha512"})  # what pip accepts


@dataclass(frozen=True)
class _System:
    """How one operating system names itself in markers and in wheel tags."""

    sys_platform: str
    platform_system: str
    os_name: str
    machines: Mapping[str, str]  # the target's machine -> platform_machine in markers


_SYSTEMS = {
    "linux": _System("linux", "Linux", "posix", {"x86_64": "x86_64", "aarch64": "aarch64"}),
    "darwin": _System("darwin", "Darwin", "posix", {"x86_64": "x86_64", "aarch64": "arm64"}),
    "windows": _System("win32", "Windows", "nt", {"x86_64": "AMD64", "aarch64": "ARM64"}),
}
# uv's --python-platform names (the aliases as uv defines them), and their parts.
_TRIPLE = re.compile(
    r"(?P<machine>x86_64|aarch64)-(?:"
    r"(?P<gnu>unknown-linux-gnu)|manylinux_2_(?P<glibc>\d+)|(?P<mac>apple-darwin)"
    r"|(?P<win>pc-windows-msvc))"
)
_ALIASES = {
    "linux": "x86_64-unknown-linux-gnu",
    "macos": "aarch64-apple-darwin",
    "windows": "x86_64-pc-windows-msvc",
}
_NO_GLIBC_BOUND = 40  # manylinux_2_N accepted up to it where the target's glibc is not named


@dataclass(frozen=True)
class Target:
    """The environment a lock is audited for: its OS (``linux``, ``darwin``,
    ``windows``), machine (``x86_64``, ``aarch64``), Python version, and the glibc its
    wheels may need (None: any); ``given`` says how it was named (None: this machine)."""

    system: str
    machine: str
    python: Version
    glibc: int | None = None
    given: str | None = None

    def describe(self) -> str:
        """``linux aarch64, Python 3.12 (--python-platform aarch64-unknown-linux-gnu)``."""
        return (
            f"{self.system} {self.machine}, Python {self.python} ({self.given or 'this machine'})"
        )

    def markers(self) -> dict[str, str]:
        """The marker environment (PEP 508) of the target: this machine's, where the target
        is this machine; else the names it fixes, and nothing of the runner's."""
        found = {k: str(v) for k, v in default_environment().items()}
        if self.given is None:
            return found
        system = _SYSTEMS[self.system]
        full = str(self.python) if len(self.python.release) > 2 else f"{self.python}.0"
        found.update(
            os_name=system.os_name,
            sys_platform=system.sys_platform,
            platform_system=system.platform_system,
            platform_machine=system.machines[self.machine],
            platform_release="",
            platform_version="",
            python_version=".".join(str(n) for n in self.python.release[:2]),
            python_full_version=full,
            implementation_name="cpython",
            implementation_version=full,
            platform_python_implementation="CPython",
        )
        return found

    def to_json(self) -> dict[str, object]:
        """The target as ``inspect --json`` states it (environment.schema.json)."""
        return {
            "system": self.system,
            "machine": self.machine,
            "python": str(self.python),
            "glibc": f"2.{self.glibc}" if self.glibc is not None else None,
            "given": self.given,
            "described": self.describe(),
        }

    def installs(self, wheel: Iterable[tags.Tag]) -> bool:
        """Whether pip on the target would install a wheel of these tags."""
        return not self.supported().isdisjoint(wheel)

    def supported(self) -> frozenset[tags.Tag]:
        """Every tag pip on the target accepts (this machine's: ``sys_tags``)."""
        return _supported(self)


_TAGS: dict[Target, frozenset[tags.Tag]] = {}


def _supported(target: Target) -> frozenset[tags.Tag]:
    if target not in _TAGS:
        if target.given is None:
            _TAGS[target] = frozenset(tags.sys_tags())
        else:
            version = (target.python.major, target.python.minor)
            platforms = _platforms(target)
            _TAGS[target] = frozenset(
                [
                    *tags.cpython_tags(version, platforms=platforms),
                    *tags.compatible_tags(version, f"cp{version[0]}{version[1]}", platforms),
                ]
            )
    return _TAGS[target]


def _platforms(target: Target) -> list[str]:
    """The platform tags of the target, most specific first."""
    m = target.machine
    if target.system == "windows":
        return ["win_amd64" if m == "x86_64" else "win_arm64"]
    if target.system == "darwin":
        return list(tags.mac_platforms((15, 0), "arm64" if m == "aarch64" else m))
    top = target.glibc if target.glibc is not None else _NO_GLIBC_BOUND
    found = [f"manylinux_2_{n}_{m}" for n in range(top, 4, -1)]
    # The legacy names of manylinux_2_17, _2_12 and _2_5 (PEP 600).
    legacy = (
        (17, "manylinux2014", ("x86_64", "aarch64")),
        (12, "manylinux2010", ("x86_64",)),
        (5, "manylinux1", ("x86_64",)),
    )
    found += [f"{name}_{m}" for n, name, machines in legacy if top >= n and m in machines]
    return [*found, f"linux_{m}"]


def target(python_platform: str | None, python_version: str | None) -> Target:
    """The target named by ``--python-platform`` and ``--python-version`` (uv's and pip's
    names); what neither names is this machine's. ValueError for a name not known."""
    if python_platform is None and python_version is None:
        return _here()
    here = _here()
    given = []
    system, machine, glibc = here.system, here.machine, None
    if python_platform is not None:
        triple = _ALIASES.get(python_platform, python_platform)
        m = _TRIPLE.fullmatch(triple)
        if m is None:
            known = ", ".join([*_ALIASES, "x86_64|aarch64-unknown-linux-gnu"])
            raise ValueError(
                f"--python-platform {python_platform[:60]!r}: not a platform cuda-gate knows "
                f"({known}, x86_64|aarch64-manylinux_2_N, -apple-darwin, -pc-windows-msvc)"
            )
        machine = m["machine"]
        system = "darwin" if m["mac"] else "windows" if m["win"] else "linux"
        glibc = int(m["glibc"]) if m["glibc"] else None
        given.append(f"--python-platform {python_platform}")
    python = here.python
    if python_version is not None:
        try:
            python = Version(python_version)
        except InvalidVersion as e:
            raise ValueError(f"--python-version {python_version[:60]!r}: not X.Y") from e
        if len(python.release) < 2 or python.major != 3 or python.is_prerelease:
            raise ValueError(f"--python-version {python_version[:60]!r}: not 3.Y or 3.Y.Z")
        given.append(f"--python-version {python_version}")
    return Target(system, machine, python, glibc, " ".join(given))


def _here() -> Target:
    """This machine, as the marker environment and ``sys_tags`` see it."""
    system = {"linux": "linux", "darwin": "darwin", "win32": "windows"}.get(sys.platform, "linux")
    machine = {"amd64": "x86_64", "arm64": "aarch64"}.get(
        host.machine().lower(), host.machine().lower()
    )
    python = Version(".".join(str(n) for n in sys.version_info[:3]))
    return Target(system, machine, python)


@dataclass(frozen=True)
class Pin:
    """One requirement of a lock that applies to the target: ``name==version`` and the
    hashes (``algorithm:hex``) its lines allow; ``line`` is the first line it was on."""

    name: str
    version: Version
    text: str  # name==version as written
    line: int
    hashes: tuple[str, ...] = ()


@dataclass(frozen=True)
class Lock:
    """A lock read for a target: the pins that apply (one per distribution and version),
    the error lines, and how many requirements the target's markers left out."""

    pins: tuple[Pin, ...]
    errors: tuple[str, ...]
    skipped: int


def logical_lines(text: str) -> list[tuple[int, str]]:
    """The lock's lines as pip reads them: comments cut, ``\\``-continued lines joined;
    each with the number of its first line; blank ones left out."""
    found: list[tuple[int, str]] = []
    pending: list[str] = []
    start = 0
    for number, raw in enumerate(text.splitlines(), 1):
        line = _COMMENT.sub("", raw)
        if not pending:
            start = number
        if line.endswith("\\"):
            pending.append(line[:-1])
            continue
        pending.append(line)
        joined = " ".join(pending).strip()
        pending = []
        if joined:
            found.append((start, joined))
    if pending and (joined := " ".join(pending).strip()):
        found.append((start, joined))
    return found


def read_lock(text: str, where: str, target: Target) -> Lock:
    """The pins of a lock that apply to ``target``: each line a PEP 508 requirement with
    one ``==`` (or ``===``) version and its ``--hash`` options; other options (``-i``,
    ``--index-url``, ``-r``) and unpinned requirements are not pins."""
    environment = target.markers()
    pins: dict[tuple[str, Version], Pin] = {}
    errors: list[str] = []
    skipped = 0
    for number, line in logical_lines(text):
        hashes = tuple(f"{a.lower()}:{h.lower()}" for a, h in _HASH.findall(line))
        spec = _HASH.sub("", line).strip()
        if not spec or spec.startswith("-"):
            continue
        try:
            requirement = Requirement(spec)
            applies = requirement.marker is None or requirement.marker.evaluate(environment)
        except (InvalidRequirement, InvalidMarker, UndefinedComparison, UndefinedEnvironmentName):
            errors.append(f"{where}:{number}: not a requirement pip reads: {spec[:60]}")
            continue
        pinned = [s for s in requirement.specifier if s.operator in ("==", "===")]
        if len(pinned) != 1 or "*" in pinned[0].version:
            continue
        if not applies:
            skipped += 1
            continue
        for h in hashes:
            if h.partition(":")[0] not in _ALGORITHMS:
                errors.append(
                    f"{where}:{number}: --hash={h[:60]}: pip takes sha256, sha384, sha512"
                )
        try:
            version = Version(pinned[0].version)
        except InvalidVersion:
            errors.append(f"{where}:{number}: {spec[:60]}: not a version")
            continue
        key = (canonicalize_name(requirement.name), version)
        text_pin = f"{requirement.name}{pinned[0].operator}{pinned[0].version}"
        earlier = pins.get(key)
        if earlier is None:
            pins[key] = Pin(requirement.name, version, text_pin, number, hashes)
        else:  # the same pin under two markers that both hold: one distribution
            merged = tuple(dict.fromkeys(earlier.hashes + hashes))
            pins[key] = Pin(earlier.name, version, earlier.text, earlier.line, merged)
    return Lock(tuple(pins.values()), tuple(errors), skipped)


@dataclass(frozen=True)
class Evaluated:
    """A lock read for a target: the lock as named, the target its markers were evaluated
    for, and how many of its requirements the markers left out."""

    lock: str
    target: Target
    left_out: int

    def note(self) -> str:
        """The line the console prints: which environment was evaluated."""
        note = f"{self.lock}: markers evaluated for {self.target.describe()}"
        if self.left_out:
            note += f"; {self.left_out} requirement(s) for other environments left out"
        return note

    def to_json(self) -> dict[str, object]:
        """As ``inspect --json`` states it (environment.schema.json's ``locks``)."""
        return {"lock": self.lock, "target": self.target.to_json(), "left_out": self.left_out}


@dataclass(frozen=True)
class Resolved:
    """A lock's pins resolved to wheels on disk: the wheels to audit, error lines (a pin
    without a wheel, a digest the lock does not allow), warnings (a wheel that does not
    install on the target) and which environment was evaluated (None: the lock was not
    read)."""

    wheels: tuple[Path, ...]
    errors: tuple[str, ...]
    warnings: tuple[str, ...] = ()
    evaluated: Evaluated | None = None


def resolve(path: Path, target: Target) -> Resolved:
    """Read the lock at ``path`` and find each pin's wheel in its folder or its
    ``wheels/`` folder (see the module docstring's steps)."""
    where = shown(path)
    try:
        text = path.read_text(encoding="utf-8", errors="replace")
    except OSError as e:
        return Resolved((), (f"{where}: cannot read: {e.strerror or e}",))
    lock = read_lock(text, where, target)
    evaluated = Evaluated(where, target, lock.skipped)
    if not lock.pins:
        error = f"{where}: no pinned requirement (name==version) for {target.describe()}"
        return Resolved((), (*lock.errors, error), (), evaluated)
    available = _wheels([path.parent, path.parent / "wheels"])
    wheels, errors, warnings = [], list(lock.errors), []
    for pin in lock.pins:
        candidates = available.get((canonicalize_name(pin.name), pin.version), [])
        if not candidates:
            errors.append(f"{where}: {pin.text}: no wheel for it in {shown(path.parent)}")
            continue
        installing = [w for w, wheel_tags in candidates if target.installs(wheel_tags)]
        chosen = installing[0] if installing else candidates[0][0]
        if not installing:
            platforms = sorted({t.platform for t in candidates[0][1]})
            warnings.append(
                f"{where}: {pin.text}: {chosen.name} ({', '.join(platforms)}) does not "
                f"install on {target.describe()}"
            )
        mismatch = _hash_mismatch(chosen, pin)
        if mismatch is not None:
            errors.append(f"{where}:{pin.line}: {pin.text}: {mismatch}")
            continue
        wheels.append(chosen)
    return Resolved(tuple(wheels), tuple(errors), tuple(warnings), evaluated)


def _wheels(
    folders: list[Path],
) -> dict[tuple[str, Version], list[tuple[Path, frozenset[tags.Tag]]]]:
    """The wheels of the folders by name and version, with their tags; a file name
    that is no wheel's (PEP 427) is not one."""
    found: dict[tuple[str, Version], list[tuple[Path, frozenset[tags.Tag]]]] = {}
    for folder in folders:
        for wheel in sorted(folder.glob("*.whl")) if folder.is_dir() else ():
            try:
                name, version, _, wheel_tags = parse_wheel_filename(wheel.name)
            except (InvalidWheelFilename, InvalidVersion):
                continue
            found.setdefault((name, version), []).append((wheel, wheel_tags))
    return found


def _hash_mismatch(wheel: Path, pin: Pin) -> str | None:
    """Why the wheel breaks the pin's hashes (its digest and those allowed), or None:
    it matches one, or the pin has none."""
    if not pin.hashes:
        return None
    by_algorithm: dict[str, list[str]] = {}
    for h in pin.hashes:
        algorithm, _, digest = h.partition(":")
        if algorithm in _ALGORITHMS:
            by_algorithm.setdefault(algorithm, []).append(digest)
    if not by_algorithm:
        return None
    digests = {}
    for algorithm, allowed in by_algorithm.items():
        try:
            digests[algorithm] = _digest(wheel, algorithm)
        except OSError as e:
            return f"{shown(wheel)}: cannot read: {e.strerror or e}"
        if digests[algorithm] in allowed:
            return None
    algorithm = "sha256" if "sha256" in by_algorithm else next(iter(by_algorithm))
    allowed = by_algorithm[algorithm]
    return (
        f"{shown(wheel)}: {algorithm} is {digests[algorithm]}, the lock allows "
        f"{' or '.join(allowed)}: these are not the bytes the lock was made with"
    )


def _digest(path: Path, algorithm: str) -> str:
    h = hashlib.new(algorithm)
    with path.open("rb") as f:
        while chunk := f.read(1 << 20):
            h.update(chunk)
    return h.hexdigest()
