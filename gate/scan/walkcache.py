"""What a folder tree's files were, remembered between audits: a file unchanged since is
not opened again.

A warm re-audit of an environment (torch, vLLM and 30 other distributions: 63,703 files,
16,076 of them with device code) opened every file for its first eight bytes to learn
what it is: most of the walk's time. Here each folder tree audited with the inspection
cache on keeps one document in the cache folder (``trees/``), keyed by the tree's real
path and this reader's version: per file, its identity as :mod:`gate.scan.cache` takes
it (device, inode, size, modification and change times; the real path is the key) and
what its first bytes said (``elf``, ``zip``, ..., or nothing recognised). A file whose
identity is unchanged gets that answer from one ``stat``; any write changes the change
time, so a changed file is opened again. The document is written only when something
differs, atomically; one that is corrupted, foreign or of another version is ignored.
"""

from __future__ import annotations

import hashlib
import json
import os
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

from gate.reader.artifacts import MISS
from gate.scan.cache import digest_of, reader_version, report_json, settled, store

if TYPE_CHECKING:
    from gate.reader.read import ArtifactReport

FORMAT = "cuda-gate-walk-cache"
# A row: device, inode, size, modification and change times (ns), kind, SHA-256 or None.
_ROW = 7
# Kinds whose reports the cache keeps by the file's SHA-256 (a wheel's are kept by the
# wheel's identity, an archive's not at all).
_HASHED = frozenset({"elf", "fatbin"})
# A report kept in the document itself: at most this many entries and kernel names.
_SMALL_ENTRIES = 16
_SMALL_KERNELS = 256


class Kinds:
    """One tree's remembered answers, and the ones this walk gives, for :meth:`save`
    (a walk's :class:`gate.reader.artifacts.Memo`).

    With ``mode`` (the inspection cache's mode name: names or headers, scanned or not),
    the document also holds the reports of the tree's small files read in that mode, by
    SHA-256 (flashinfer-cubin's 15,970 cubins of a kernel or two each): one document
    read instead of a cache document per file.
    """

    def __init__(self, root: str, folder: Path, mode: str | None = None) -> None:
        self.root = root
        self.reader = reader_version()
        self.mode = mode
        key = hashlib.sha256(f"{self.reader}\0{root}".encode(errors="surrogateescape"))
        self.folder = folder
        self.entry = folder / "trees" / f"{key.hexdigest()}.json"
        self.known, self.reports = self._load()
        self.now: dict[str, list[Any]] = {}
        self.read: dict[str, ArtifactReport] = {}  # small files read by this audit, by key
        self.prefix = root.rstrip("/") + "/"
        self.began = time.time_ns()

    def _load(self) -> tuple[dict[str, list[Any]], dict[str, Any]]:
        try:
            doc = json.loads(self.entry.read_bytes())
            if doc["format"] != FORMAT or doc["reader"] != self.reader or doc["root"] != self.root:
                return {}, {}
            files, reports = doc["files"], doc.get("reports")
            if not isinstance(files, dict):
                return {}, {}
            same = self.mode is not None and doc.get("mode") == self.mode
            return files, reports if same and isinstance(reports, dict) else {}
        except (OSError, ValueError, LookupError, TypeError):
            return {}, {}

    def _key(self, real: str) -> str | None:
        return real[len(self.prefix) :] if real.startswith(self.prefix) else None

    def kind(self, real: str, st: os.stat_result) -> tuple[object, str | None, object]:
        """What the file at ``real`` is (a kind, or None), its SHA-256 and its kept report
        (a cache document's ``report``) when known, if unchanged since; else
        ``(MISS, None, None)``."""
        key = self._key(real)
        if key is None:
            return MISS, None, None
        row = self.known.get(key)
        if (
            not isinstance(row, list)
            or len(row) != _ROW
            or row[:5] != [st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns]
            or not (row[5] is None or isinstance(row[5], str))
            or not (row[6] is None or isinstance(row[6], str))
        ):
            return MISS, None, None
        self.now[key] = row
        return row[5], row[6], self.reports.get(row[6]) if row[6] else None

    def remember(self, real: str, st: os.stat_result, kind: str | None) -> None:
        """The answer the file's first bytes gave, with the identity taken before; not
        kept for a file changed just before this walk began (RACY_NS)."""
        key = self._key(real)
        if key is not None and settled(st, self.began):
            ident = [st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns]
            self.now[key] = [*ident, kind, None]

    def keep(self, real: str | None, reports: tuple[ArtifactReport, ...]) -> None:
        """A file's reports from this audit's read: kept in the document when it is one
        small, readable file (in this memo's mode)."""
        key = self._key(real) if real is not None and self.mode is not None else None
        if key is None or key not in self.now or len(reports) != 1:
            return
        (report,) = reports
        entries = report.listing.entries
        if (
            report.error is None
            and len(entries) <= _SMALL_ENTRIES
            and (sum(len(e.kernels) for e in entries) <= _SMALL_KERNELS)
        ):
            self.read[key] = report

    def save(self) -> None:
        """Keep what this walk found, when it differs from what was remembered: each
        file's SHA-256 taken from the cache's identities where a read has just put it
        (so that the next walk needs no identity document either), and the small files'
        reports by that SHA-256."""
        for key, row in self.now.items():
            if row[6] is None and row[5] in _HASHED:
                row[6] = digest_of(self.prefix + key, row[:5], self.folder)
        digests = {row[6] for row in self.now.values() if row[6]}
        reports = {d: r for d, r in self.reports.items() if d in digests}
        for key, report in self.read.items():
            digest = self.now[key][6]
            if digest and digest not in reports:
                reports[digest] = report_json(report)
        if self.now == self.known and reports.keys() == self.reports.keys():
            return
        doc = {
            "format": FORMAT,
            "reader": self.reader,
            "root": self.root,
            "mode": self.mode,
            "files": self.now,
            "reports": reports,
        }
        store(self.entry, doc)
