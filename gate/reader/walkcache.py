"""What a folder tree's files were, remembered between audits: a file unchanged since is
not opened again.

A warm re-audit of an environment (torch, vLLM and 30 other distributions: 63,703 files,
16,076 of them with device code) opened every file for its first eight bytes to learn
what it is: most of the walk's time. Here each folder tree audited with the inspection
cache on keeps one document in the cache folder (``trees/``), keyed by the tree's real
path and this reader's version: per file, its identity as :mod:`gate.reader.cache` takes
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
from typing import Any, Final

FORMAT = "cuda-gate-walk-cache"
# Unknown to this memo (different from None: "known, and no artifact").
MISS: Final = object()
# A file's times tick with the kernel's coarse clock (a few ms): two writes within one
# tick can leave the same times. What was learnt of a file less than this after it last
# changed may not hold for its content later, so it is not kept, here or in the cache's
# identities (git's index calls such a file "racily clean"); it is read again next time.
RACY_NS = 100_000_000
# A row: device, inode, size, modification and change times (ns), kind, SHA-256 or None.
_ROW = 7
# Kinds whose reports the cache keeps by the file's SHA-256 (a wheel's are kept by the
# wheel's identity, an archive's not at all).
_HASHED = frozenset({"elf", "fatbin"})


class Kinds:
    """One tree's remembered answers, and the ones this walk gives, for :meth:`save`."""

    def __init__(self, root: str, folder: Path) -> None:
        from gate.reader.cache import reader_version  # noqa: PLC0415  (the cache imports this)

        self.root = root
        self.reader = reader_version()
        key = hashlib.sha256(f"{self.reader}\0{root}".encode(errors="surrogateescape"))
        self.folder = folder
        self.entry = folder / "trees" / f"{key.hexdigest()}.json"
        self.known: dict[str, list[Any]] = self._load()
        self.now: dict[str, list[Any]] = {}
        self.prefix = root.rstrip("/") + "/"
        self.began = time.time_ns()

    def _load(self) -> dict[str, list[Any]]:
        try:
            doc = json.loads(self.entry.read_bytes())
            if doc["format"] != FORMAT or doc["reader"] != self.reader or doc["root"] != self.root:
                return {}
            files = doc["files"]
            return files if isinstance(files, dict) else {}
        except (OSError, ValueError, LookupError, TypeError):
            return {}

    def _key(self, real: str) -> str | None:
        return real[len(self.prefix) :] if real.startswith(self.prefix) else None

    def kind(self, real: str, st: os.stat_result) -> tuple[object, str | None]:
        """What the file at ``real`` is (a kind, or None) and its SHA-256 when known, if
        unchanged since; else ``(MISS, None)``."""
        key = self._key(real)
        if key is None:
            return MISS, None
        row = self.known.get(key)
        if (
            not isinstance(row, list)
            or len(row) != _ROW
            or row[:5] != [st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns]
            or not (row[5] is None or isinstance(row[5], str))
            or not (row[6] is None or isinstance(row[6], str))
        ):
            return MISS, None
        self.now[key] = row
        return row[5], row[6]

    def remember(self, real: str, st: os.stat_result, kind: str | None) -> None:
        """The answer the file's first bytes gave, with the identity taken before; not
        kept for a file changed just before this walk began (RACY_NS)."""
        key = self._key(real)
        if key is not None and max(st.st_mtime_ns, st.st_ctime_ns) < self.began - RACY_NS:
            ident = [st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns]
            self.now[key] = [*ident, kind, None]

    def save(self) -> None:
        """Keep what this walk found, when it differs from what was remembered: each
        file's SHA-256 taken from the cache's identities where a read has just put it
        (so that the next walk needs no identity document either)."""
        from gate.reader.cache import digest_of, store  # noqa: PLC0415

        for key, row in self.now.items():
            if row[6] is None and row[5] in _HASHED:
                row[6] = digest_of(self.prefix + key, row[:5], self.folder)
        if self.now == self.known:
            return
        doc = {"format": FORMAT, "reader": self.reader, "root": self.root, "files": self.now}
        store(self.entry, doc)
