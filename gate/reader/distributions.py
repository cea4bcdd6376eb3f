"""Environments read by distribution: who owns each artifact, from ``*.dist-info``/``RECORD``.

What can be audited: a virtual environment (or any folder tree: an image's files laid
out in a folder), a ``site-packages`` folder, a folder of wheels, single wheels, and a
requirements lock whose pinned wheels lie on disk. Every site-packages folder under a
root (a folder holding ``*.dist-info``, or one named ``site-packages``/``dist-packages``)
gives its distributions: name and version from ``METADATA``, files from ``RECORD``.
Each wheel is one distribution (name and version from the ``METADATA`` inside it).
Files no distribution owns are grouped by their folder.

The entry points, for ``inspect`` and for image readers that lay files out first:

``audit_paths(paths, ...) -> Audit``
    Roots, site-packages folders, wheels and lock files, grouped.
``audit_root(root, ...) -> Audit``
    One folder tree (a venv, an image's root file system), grouped.
"""

from __future__ import annotations

import csv
import enum
import io
import os
import re
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from itertools import islice
from pathlib import Path
from typing import TYPE_CHECKING

from gate.errors import BadInputError
from gate.reader import artifacts
from gate.reader.artifacts import shown
from gate.reader.limits import Limits
from gate.reader.metadata import header_fields
from gate.reader.parallel import read_each
from gate.reader.read import ArtifactReport

if TYPE_CHECKING:
    from gate.reader.walkcache import Kinds

# Folders never searched for site-packages: caches anywhere, and at the top of a root
# an image's virtual file systems.
_SKIP = frozenset({"__pycache__", ".git"})
_SKIP_TOP = frozenset({"proc", "sys", "dev"})
_SITE = frozenset({"site-packages", "dist-packages"})
# A relative path without empty, "." or ".." parts: joined to a folder, already normal.
_PLAIN = re.compile(r"(?!/)(?!\.\.?(?:/|$))(?:[^/]+/(?!/|\.\.?(?:/|$)))*[^/]+")
_PIN = re.compile(r"^\s*([A-Za-z0-9][A-Za-z0-9._-]*)\s*(?:\[[^\]]*\])?\s*===?\s*([^\s;#\\]+)")


class Owner(enum.Enum):
    """What a group of files is: an installed distribution, a wheel, or a plain folder."""

    DIST_INFO = "dist-info"
    WHEEL = "wheel"
    FOLDER = "folder"


@dataclass(frozen=True)
class Distribution:
    """Who owns a group of artifacts: name and version (``-`` for a folder) and where."""

    name: str
    version: str
    owner: Owner
    source: str  # the dist-info folder, the wheel, or the folder, as shown


@dataclass(frozen=True)
class Group:
    """One distribution (or folder) and the artifacts read from it, with their paths
    inside it (``bitsandbytes/libbitsandbytes_cuda128.so``), in the same order."""

    distribution: Distribution
    reports: tuple[ArtifactReport, ...]
    members: tuple[str, ...]


@dataclass(frozen=True)
class Audit:
    """Every group found under the paths, and the errors that are not any group's."""

    groups: tuple[Group, ...]
    errors: tuple[str, ...]

    def __add__(self, other: Audit) -> Audit:
        return Audit(self.groups + other.groups, self.errors + other.errors)


@dataclass(frozen=True)
class _Reading:
    names: bool
    scan: bool
    limits: Limits
    cache: bool
    digests: bool = True
    # Whether a folder tree's walk is remembered (with the cache): not for a folder that
    # exists only for this audit (an image's files laid out in a temporary one).
    memo: bool = True

    def read_each(
        self, found: Sequence[artifacts.Found | artifacts.Unreadable]
    ) -> Iterator[tuple[ArtifactReport, ...]]:
        """The reports of each file in turn, names decoded by a pool of processes."""
        return read_each(
            found, names=self.names, scan=self.scan, limits=self.limits, cache=self.cache,
            digests=self.digests,
        )  # fmt: skip


def is_environment(path: Path) -> bool:
    """Whether a folder is read by distribution: a venv, a site-packages folder, a tree
    holding one (``lib/python3.X/site-packages``), or a folder of wheels."""
    if not path.is_dir():
        return path.suffix == ".txt" and path.is_file()
    if (path / "pyvenv.cfg").is_file() or _holds_dist_info(path):
        return True
    try:
        if any(p.suffix == ".whl" for p in path.iterdir()):
            return True
    except OSError:
        return False
    return any(path.glob("lib*/python3*/site-packages")) or any(path.glob("Lib/site-packages"))


def _holds_dist_info(folder: Path) -> bool:
    try:
        return any(p.name.endswith(".dist-info") and p.is_dir() for p in folder.iterdir())
    except OSError:
        return False


def site_packages(root: Path) -> tuple[Path, ...]:
    """The site-packages folders under ``root``: itself if it holds ``*.dist-info``, and
    every folder named site-packages or dist-packages (not searched inside)."""
    found = [root] if _holds_dist_info(root) else []
    for folder, dirs, _ in os.walk(root):
        here = Path(folder)
        top = _SKIP_TOP if here == root else frozenset()
        dirs[:] = sorted(d for d in dirs if d not in _SKIP and d not in top)
        if here.name in _SITE and here != root:
            found.append(here)
            dirs[:] = []
    return tuple(found)


def installed(site: Path) -> Iterator[tuple[Distribution, frozenset[str]]]:
    """Each distribution of one site-packages folder and the files its RECORD lists
    (absolute, normalised); a dist-info without a readable RECORD owns nothing."""
    for info in sorted(p for p in site.iterdir() if p.name.endswith(".dist-info")):
        name, version = _metadata(info)
        try:
            text = (info / "RECORD").read_text(encoding="utf-8", errors="replace")
        except OSError:
            text = ""
        files = record_files(os.fspath(site), text)
        yield Distribution(name, version, Owner.DIST_INFO, shown(info)), frozenset(files)


def record_files(site: str, text: str) -> set[str]:
    """The files a RECORD's ``text`` lists, each as ``os.path.normpath`` joins it to the
    ``site`` folder. Text, not Path: torch's RECORD alone lists 12,000 files; a plain
    relative row ("torch/lib/x.so") needs no normalising, the rest ("../../bin/x") does."""
    base, join, normpath = site.rstrip("/") + "/", os.path.join, os.path.normpath
    return {
        base + row[0] if _PLAIN.fullmatch(row[0]) else normpath(join(base, row[0]))
        for row in csv.reader(io.StringIO(text))
        if row and row[0]
    }


def _metadata(info: Path) -> tuple[str, str]:
    """Name and Version from METADATA, else from the folder's name (``name-1.0.dist-info``)."""
    stem = info.name.removesuffix(".dist-info")
    name, _, version = stem.partition("-")
    try:
        text = (info / "METADATA").read_text(encoding="utf-8", errors="replace")
    except OSError:
        return name, version or "?"
    return _headers(text, name, version or "?")


def _headers(text: str, name: str, version: str) -> tuple[str, str]:
    fields = header_fields(text)
    return fields.get("name", name).strip() or name, fields.get("version", version).strip()


def wheel_distribution(path: Path) -> Distribution:
    """A wheel's name and version from its METADATA (else its file name); BadInputError
    when it is no readable zip."""
    display = shown(path)
    name, version = [*path.name.split("-"), "?"][:2]
    with artifacts.open_zip(path, display) as archive:
        for info in archive.zip.infolist():
            parts = info.filename.split("/")
            if len(parts) == 2 and parts[0].endswith(".dist-info") and parts[1] == "METADATA":
                if info.file_size > 1 << 20:
                    break
                text = archive.zip.read(info).decode("utf-8", "replace")
                name, version = _headers(text, name, version)
                break
    return Distribution(name, version, Owner.WHEEL, display)


def audit_paths(
    paths: Sequence[Path],
    *,
    names: bool = False,
    scan: bool = True,
    limits: Limits | None = None,
    cache: bool = False,
    digests: bool = True,
) -> Audit:
    """Every path read by distribution: folders as roots, wheels, lock files; ``digests``
    as gate.reader.read takes it. Every path's files are read at once (one pool of
    processes for all: the largest files first, whichever path holds them)."""
    how = _Reading(names, scan, limits or Limits.from_env(), cache, digests)
    jobs: list[_Job] = []
    for path in paths:
        if path.is_dir():
            jobs += _root(path, how)
        elif path.suffix == ".whl":
            jobs.append(_wheels([path]))
        elif path.suffix == ".txt" and path.is_file():
            jobs.append(_lock(path))
        elif not path.exists():
            jobs.append(_Job.error(f"{shown(path)}: no such file or folder"))
        else:
            jobs.append(_loose([path], path.parent))
    return _read(jobs, how)


def audit_root(
    root: Path,
    *,
    names: bool = False,
    scan: bool = True,
    limits: Limits | None = None,
    cache: bool = False,
    digests: bool = True,
    temporary: bool = False,
) -> Audit:
    """One folder tree (a venv, a site-packages folder, an image laid out in a folder);
    ``temporary``: a folder made for this audit alone, whose walk is not remembered."""
    how = _Reading(names, scan, limits or Limits.from_env(), cache, digests, not temporary)
    return _read(_root(root, how), how)


Reports = Iterator[tuple[ArtifactReport, ...]]


@dataclass(frozen=True)
class _Job:
    """Files to read, and what makes their reports (each file's, in order) an Audit."""

    found: list[artifacts.Found | artifacts.Unreadable]
    assemble: Callable[[Reports], Audit]

    @staticmethod
    def error(message: str) -> _Job:
        return _Job([], lambda _: Audit((), (message,)))


def _read(jobs: list[_Job], how: _Reading) -> Audit:
    """Every job's files read by one :func:`read_each` (its pool starts here), then each
    job's Audit, in order; what a job does before taking its reports (a root's RECORD
    files) runs while the pool reads."""
    reports = how.read_each([f for job in jobs for f in job.found])
    audit = Audit((), ())
    for job in jobs:
        audit += job.assemble(islice(reports, len(job.found)))
    return audit


def _root(root: Path, how: _Reading) -> list[_Job]:
    """A folder tree's files by owner (its distributions' RECORD files, else their
    folder), and the wheels in it: each wheel a distribution. With the cache on, the
    walk remembers what each file is, and the reports of small ones (gate.reader.walkcache)."""
    wheels: list[Path] = []
    errors: list[str] = []
    readable: list[artifacts.Found | artifacts.Unreadable] = []
    memo = _memo(root, how) if how.cache and how.memo else None
    for found in artifacts.discover([root], memo):
        if isinstance(found, artifacts.Unreadable):
            errors.append(found.message)
        elif found.kind != "zip":
            readable.append(found)
        elif found.path.suffix == ".whl":
            wheels.append(found.path)
        # other zips in an environment are data, not libraries

    def assemble(reports: Reports) -> Audit:
        owners: dict[str, Distribution] = {}
        order: list[Distribution] = []
        for site in site_packages(root):
            for dist, files in installed(site):
                order.append(dist)
                for f in files:
                    owners.setdefault(f, dist)
        owned: dict[Distribution, list[tuple[ArtifactReport, str]]] = {d: [] for d in order}
        sites = {d: Path(d.source).parent for d in order}
        loose: dict[str, list[tuple[ArtifactReport, str]]] = {}
        for found, got in zip(readable, reports, strict=True):
            if not isinstance(found, artifacts.Found):
                continue
            if memo is not None:
                memo.keep(found.real, got)
            owner = owners.get(os.path.normpath(found.path))
            for report in got:
                if owner is not None:
                    owned[owner].append((report, _relative(found.path, sites[owner], report)))
                else:
                    parent = found.path.parent
                    folder = shown(parent.relative_to(root)) if found.path != root else "."
                    item = (report, _relative(found.path, root, report))
                    loose.setdefault(folder, []).append(item)
        if memo is not None:  # after the reads: they remembered each file's SHA-256
            memo.save()
        groups = [_group(d, owned[d]) for d in order]
        for folder, items in sorted(loose.items()):
            dist = Distribution(f"{folder}/" if folder != "." else "./", "-", Owner.FOLDER, folder)
            groups.append(_group(dist, items))
        return Audit(tuple(groups), tuple(errors))

    return [_Job(readable, assemble), _wheels(wheels)]


def _memo(root: Path, how: _Reading) -> Kinds | None:
    from gate.reader.cache import cache_dir, mode_name  # noqa: PLC0415  (it imports the reader)
    from gate.reader.walkcache import Kinds  # noqa: PLC0415

    try:
        return Kinds(
            os.path.realpath(root), cache_dir(), mode_name(how.names, how.scan, how.digests)
        )
    except (OSError, ValueError):
        return None


def _relative(path: Path, base: Path, report: ArtifactReport) -> str:
    """A report's path inside its group: relative to the site-packages or root folder,
    with an archive member's name kept."""
    text, prefix = os.fspath(path), os.fspath(base).rstrip("/") + "/"
    # Every path here lies under its base: where what follows it is plain, cutting the
    # base off gives relpath's answer, cheaper.
    rest = text[len(prefix) :] if text.startswith(prefix) else ""
    rel = shown(rest if _PLAIN.fullmatch(rest) else os.path.relpath(path, base))
    shown_path = shown(path)
    return rel + report.path[len(shown_path) :] if report.path.startswith(shown_path) else rel


def _group(dist: Distribution, items: list[tuple[ArtifactReport, str]]) -> Group:
    return Group(dist, tuple(r for r, _ in items), tuple(m for _, m in items))


def _wheels(paths: Sequence[Path]) -> _Job:
    dists, found, errors = [], [], []
    for path in paths:
        try:
            dists.append(wheel_distribution(path))
        except BadInputError as e:
            errors.append(e.message)
            continue
        found.append(artifacts.Found(path, "zip"))

    def assemble(reports: Reports) -> Audit:
        groups = []
        for dist, got in zip(dists, reports, strict=True):
            prefix = f"{dist.source}!"
            members = tuple(r.path.removeprefix(prefix) for r in got)
            groups.append(Group(dist, got, members))
        return Audit(tuple(groups), tuple(errors))

    return _Job(list(found), assemble)


def _loose(paths: Sequence[Path], base: Path) -> _Job:
    def assemble(reports: Reports) -> Audit:
        items = []
        for got in reports:
            for report in got:
                items.append((report, report.path.removeprefix(shown(base) + "/")))
        folder = shown(base)
        group = _group(Distribution(f"{folder}/", "-", Owner.FOLDER, folder), items)
        return Audit((group,), ())

    return _Job(list(artifacts.discover(paths)), assemble)


def pinned(text: str) -> tuple[tuple[str, str], ...]:
    """``(name, version)`` of each ``name==version`` line of a requirements lock."""
    return tuple((m.group(1), m.group(2)) for line in text.splitlines() if (m := _PIN.match(line)))


def _normal(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def _lock(path: Path) -> _Job:
    """A requirements lock, each pin resolved to a wheel in the lock's folder (or its
    ``wheels/`` folder); a pin with no wheel on disk is an error line."""
    try:
        pins = pinned(path.read_text(encoding="utf-8", errors="replace"))
    except OSError as e:
        return _Job.error(f"{shown(path)}: cannot read: {e.strerror or e}")
    if not pins:
        return _Job.error(f"{shown(path)}: no pinned requirement (name==version) in it")
    folders = [path.parent, path.parent / "wheels"]
    available: dict[tuple[str, str], Path] = {}
    for folder in folders:
        for wheel in sorted(folder.glob("*.whl")) if folder.is_dir() else ():
            parts = wheel.name.split("-")
            if len(parts) >= 2:
                available.setdefault((_normal(parts[0]), parts[1]), wheel)
    chosen, errors = [], []
    for name, version in pins:
        match = available.get((_normal(name), version))
        if match is None:
            errors.append(
                f"{shown(path)}: {name}=={version}: no wheel for it in {shown(path.parent)}"
            )
        else:
            chosen.append(match)
    job = _wheels(chosen)
    return _Job(job.found, lambda reports: job.assemble(reports) + Audit((), tuple(errors)))
