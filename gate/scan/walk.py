"""Read these paths: files, folders (recursively), archives and wheels, reports in order.

``read_paths(paths, *, names=True) -> Iterator[ArtifactReport]`` never raises
BadInputError: each failing artifact comes back as a report whose ``error`` says what
is wrong. ``progress`` hears (files done, files known, the one read now) before each
file, each wheel member counted as a file.
"""

from __future__ import annotations

import os
from collections.abc import Iterator, Sequence

from gate.reader import artifacts
from gate.reader.artifacts import shown
from gate.reader.limits import Limits
from gate.reader.read import ArtifactReport, Progress
from gate.scan.parallel import read_each


def read_paths(
    paths: Sequence[str | os.PathLike[str]],
    *,
    names: bool = True,
    scan: bool = True,
    limits: Limits | None = None,
    cache: bool = False,
    progress: Progress | None = None,
    digests: bool = True,
) -> Iterator[ArtifactReport]:
    """Reports for every artifact under ``paths``; failures become reports with ``error``.

    With ``cache``, files and wheels (not archives) go through the inspection cache
    (:mod:`gate.scan.cache`): a file read before in the same mode is not read.
    With ``names``, many files are read by a pool of processes (:mod:`gate.scan.parallel`),
    the reports coming in the same order. ``progress`` hears of each file as its reports
    come; a wheel's members join the count when it is opened in this process.
    """
    limits = limits or Limits.from_env()
    everything = list(artifacts.discover(paths))
    count = _Count(len(everything), progress)

    def before(found: artifacts.Found | artifacts.Unreadable) -> None:
        count.next(found.path if isinstance(found, artifacts.Unreadable) else shown(found.path))

    for reports in read_each(
        everything, names=names, scan=scan, limits=limits, cache=cache, before=before,
        members=count.members, digests=digests,
    ):  # fmt: skip
        yield from reports


class _Count:
    """The files read so far and the files known, for a progress callback."""

    def __init__(self, total: int, progress: Progress | None) -> None:
        self.done, self.total, self.progress = -1, total, progress
        self.base = 0

    def next(self, name: str) -> None:
        self.done += 1
        self.base = self.done
        if self.progress is not None:
            self.progress(self.done, self.total, name)

    def members(self, index: int, count: int, name: str) -> None:
        """Member ``index`` of ``count`` in the wheel being read (which counts as one file)."""
        if index == 0:
            self.total += count - 1
        self.done = self.base + index
        if self.progress is not None:
            self.progress(self.done, self.total, name)
