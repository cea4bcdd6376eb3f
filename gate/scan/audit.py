"""Environments audited by distribution: paths walked, their artifacts read, grouped.

The entry points, for ``inspect`` and for image readers that lay files out first:

``audit_paths(paths, ...) -> Audit``
    Roots, site-packages folders, wheels and lock files, grouped.
``audit_root(root, ...) -> Audit``
    One folder tree (a venv, an image's root file system), grouped.

Who owns a file, and the records an audit is made of, are the reader's
(:mod:`gate.reader.distributions`); here the files are found, read by one pool of
processes (:mod:`gate.scan.parallel`) and, with the cache, a tree's walk remembered
(:mod:`gate.scan.walkcache`).
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from itertools import islice
from pathlib import Path
from typing import TYPE_CHECKING

from gate.errors import BadInputError
from gate.reader import artifacts
from gate.reader.artifacts import shown
from gate.reader.distributions import (
    Audit,
    Distribution,
    Group,
    Owner,
    installed,
    relative_path,
    site_packages,
    wheel_distribution,
)
from gate.reader.limits import Limits
from gate.reader.locks import Target, resolve, target
from gate.reader.read import ArtifactReport
from gate.scan.parallel import read_each

if TYPE_CHECKING:
    from gate.scan.walkcache import Kinds


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


def audit_paths(
    paths: Sequence[Path],
    *,
    names: bool = False,
    scan: bool = True,
    limits: Limits | None = None,
    cache: bool = False,
    digests: bool = True,
    audited: Target | None = None,
) -> Audit:
    """Every path read by distribution: folders as roots, wheels, lock files (their
    markers evaluated for ``audited``, default this machine); ``digests`` as
    gate.reader.read takes it. Every path's files are read at once (one pool of
    processes for all: the largest files first, whichever path holds them)."""
    how = _Reading(names, scan, limits or Limits.from_env(), cache, digests)
    jobs: list[_Job] = []
    for path in paths:
        if path.is_dir():
            jobs += _root(path, how)
        elif path.suffix == ".whl":
            jobs.append(_wheels([path]))
        elif path.suffix == ".txt" and path.is_file():
            jobs.append(_lock(path, audited))
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
    walk remembers what each file is, and the reports of small ones (gate.scan.walkcache)."""
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
                    owned[owner].append((report, relative_path(found.path, sites[owner], report)))
                else:
                    parent = found.path.parent
                    folder = shown(parent.relative_to(root)) if found.path != root else "."
                    item = (report, relative_path(found.path, root, report))
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
    from gate.scan.cache import cache_dir, mode_name  # noqa: PLC0415  (with the cache only)
    from gate.scan.walkcache import Kinds  # noqa: PLC0415

    try:
        return Kinds(
            os.path.realpath(root), cache_dir(), mode_name(how.names, how.scan, how.digests)
        )
    except (OSError, ValueError):
        return None


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


def _lock(path: Path, audited: Target | None) -> _Job:
    """A requirements lock read for ``audited`` (None: this machine), each pin that applies
    resolved to a wheel in the lock's folder (or its ``wheels/`` folder) and its hashes
    checked (:mod:`gate.reader.locks`); a pin with no wheel on disk, or a wheel whose
    digest the lock does not allow, is an error line."""
    resolved = resolve(path, audited or target(None, None))
    job = _wheels(list(resolved.wheels))
    locks = (resolved.evaluated,) if resolved.evaluated else ()
    said = Audit((), resolved.errors, resolved.warnings, locks)
    return _Job(job.found, lambda reports: job.assemble(reports) + said)
