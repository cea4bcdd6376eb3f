"""Environments read by distribution: who owns each artifact, from ``*.dist-info``/``RECORD``.

What can be audited: a virtual environment (or any folder tree: an image's files laid
out in a folder), a ``site-packages`` folder, a folder of wheels, single wheels, and a
requirements lock whose pinned wheels lie on disk. Every site-packages folder under a
root (a folder holding ``*.dist-info``, or one named ``site-packages``/``dist-packages``)
gives its distributions: name and version from ``METADATA``, files from ``RECORD``.
Each wheel is one distribution (name and version from the ``METADATA`` inside it).
Files no distribution owns are grouped by their folder.

Here: the records (:class:`Audit` of :class:`Group`) and what tells who owns a file.
Walking the paths and reading their artifacts into an Audit is the engine's
(:func:`gate.scan.audit.audit_paths`, :func:`gate.scan.audit.audit_root`).
"""

from __future__ import annotations

import csv
import enum
import io
import os
import re
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from gate.reader import artifacts
from gate.reader.artifacts import shown
from gate.reader.metadata import header_fields
from gate.reader.read import ArtifactReport

if TYPE_CHECKING:
    from gate.reader.locks import Evaluated

# Folders never searched for site-packages: caches anywhere, and at the top of a root
# an image's virtual file systems.
_SKIP = frozenset({"__pycache__", ".git"})
_SKIP_TOP = frozenset({"proc", "sys", "dev"})
_SITE = frozenset({"site-packages", "dist-packages"})
# A relative path without empty, "." or ".." parts: joined to a folder, already normal.
_PLAIN = re.compile(r"(?!/)(?!\.\.?(?:/|$))(?:[^/]+/(?!/|\.\.?(?:/|$)))*[^/]+")


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
    """Every group found under the paths, the errors that are not any group's, warnings,
    and each lock read: the environment its markers were evaluated for."""

    groups: tuple[Group, ...]
    errors: tuple[str, ...]
    warnings: tuple[str, ...] = ()
    locks: tuple[Evaluated, ...] = ()

    @property
    def notes(self) -> tuple[str, ...]:
        """How the paths were read, a line each: which environment each lock was read for."""
        return tuple(lock.note() for lock in self.locks)

    def __add__(self, other: Audit) -> Audit:
        return Audit(
            self.groups + other.groups,
            self.errors + other.errors,
            self.warnings + other.warnings,
            self.locks + other.locks,
        )


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
    """A wheel's name and version from its METADATA (else, that missing or unreadable, its
    file name); BadInputError when it is no readable zip."""
    display = shown(path)
    name, version = [*path.name.split("-"), "?"][:2]
    with artifacts.open_zip(path, display) as archive:
        for info in archive.zip.infolist():
            parts = info.filename.split("/")
            if len(parts) == 2 and parts[0].endswith(".dist-info") and parts[1] == "METADATA":
                if info.file_size > 1 << 20:
                    break
                try:
                    text = archive.zip.read(info).decode("utf-8", "replace")
                except artifacts.zip_errors():  # a bad CRC, a broken stream
                    break  # its file name says it: the members' errors are theirs to say
                name, version = _headers(text, name, version)
                break
    return Distribution(name, version, Owner.WHEEL, display)


def relative_path(path: Path, base: Path, report: ArtifactReport) -> str:
    """A report's path inside its group: relative to the site-packages or root folder,
    with an archive member's name kept."""
    text, prefix = os.fspath(path), os.fspath(base).rstrip("/") + "/"
    # Every path here lies under its base: where what follows it is plain, cutting the
    # base off gives relpath's answer, cheaper.
    rest = text[len(prefix) :] if text.startswith(prefix) else ""
    rel = shown(rest if _PLAIN.fullmatch(rest) else os.path.relpath(path, base))
    shown_path = shown(path)
    return rel + report.path[len(shown_path) :] if report.path.startswith(shown_path) else rel
