"""The evidence folder: every stage writes its files here, atomically and redacted.

Files are written through one object so that (1) a folder that cannot be written
fails once, early, with one line; (2) every text passes the secret redactor; (3)
each write is atomic (temp file + os.replace), so a crash never leaves half a file.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

from gate.errors import EvidenceError
from gate.redact import redact

# The file that marks a folder as ours, so a rerun may replace it.
RESULT_FILE = "result.json"


class EvidenceDir:
    """A folder of evidence files for one gate run."""

    def __init__(self, root: Path) -> None:
        self.root = root

    @classmethod
    def create(cls, root: Path) -> EvidenceDir:
        """Create (or replace an earlier run's) evidence folder; EvidenceError if impossible."""
        if root.exists() and not root.is_dir():
            raise EvidenceError(f"{root}: evidence path exists and is not a folder")
        if root.is_dir() and any(root.iterdir()):
            if not (root / RESULT_FILE).exists() and not (root / ".cuda-gate").exists():
                raise EvidenceError(
                    f"{root}: folder is not empty and holds no earlier cuda-gate evidence; "
                    "refusing to replace it",
                    hint="choose another --evidence folder",
                )
            try:
                shutil.rmtree(root)
            except OSError as e:
                raise EvidenceError(f"{root}: cannot replace earlier evidence: {e.strerror}") from e
        try:
            root.mkdir(parents=True, exist_ok=True)
            (root / ".cuda-gate").write_text("cuda-gate evidence folder\n", encoding="utf-8")
        except OSError as e:
            raise EvidenceError(f"{root}: evidence folder is not writable: {e.strerror}") from e
        return cls(root)

    def path(self, name: str) -> Path:
        """Absolute path of an evidence file (which may not exist yet)."""
        return self.root / name

    def write_text(self, name: str, text: str) -> Path:
        """Write a text file, secrets redacted, atomically."""
        return self.write_bytes(name, redact(text).encode("utf-8"))

    def write_json(self, name: str, data: object) -> Path:
        """Write a JSON document (sorted keys, trailing newline), secrets redacted."""
        return self.write_text(name, json.dumps(data, indent=2, sort_keys=True) + "\n")

    def write_bytes(self, name: str, data: bytes) -> Path:
        """Write raw bytes atomically. Callers pass text through write_text."""
        target = self.path(name)
        try:
            target.parent.mkdir(parents=True, exist_ok=True)
            fd, tmp = tempfile.mkstemp(dir=target.parent, prefix=f".{target.name}.")
            with os.fdopen(fd, "wb") as handle:
                handle.write(data)
            Path(tmp).replace(target)
        except OSError as e:
            raise EvidenceError(f"{target}: cannot write evidence: {e.strerror or e}") from e
        return target

    def files(self) -> Iterator[Path]:
        """Every evidence file, sorted, relative to the folder (marker files excluded)."""
        for path in sorted(self.root.rglob("*")):
            if path.is_file() and not path.name.startswith("."):
                yield path.relative_to(self.root)


def sha256_file(path: Path) -> str:
    """Hex SHA-256 of a file, read in chunks."""
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        for chunk in iter(lambda: handle.read(1 << 20), b""):
            digest.update(chunk)
    return digest.hexdigest()
