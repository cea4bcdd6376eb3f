"""The one atomic file writer and the one SHA-256 of a file.

Every machine-readable file cuda-gate writes (evidence, result.json, manifests,
indexes, keys, reports) goes through :func:`write_atomic`: a temp file in the same
folder, synced, then ``os.replace``; a crash leaves either the old file or the new
one, never half of either, and the temp file never outlives a failure.
"""

from __future__ import annotations

import hashlib
import os
import tempfile
from pathlib import Path

from gate.errors import EvidenceError

_BLOCK = 1 << 20


def write_atomic(target: Path, data: bytes, *, mode: int = 0o644) -> Path:
    """Write ``data`` to ``target`` atomically; EvidenceError naming the file on failure.

    The temp file gets ``mode`` before any byte is written, so a private key is
    never readable by others, not even briefly.
    """
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=target.parent, prefix=f".{target.name}.")
    except OSError as e:
        raise EvidenceError(f"{target}: cannot write: {e.strerror or e}") from e
    try:
        os.fchmod(fd, mode)
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
            handle.flush()
            os.fsync(handle.fileno())
        Path(tmp).replace(target)
    except BaseException as e:
        Path(tmp).unlink(missing_ok=True)
        if isinstance(e, OSError):
            raise EvidenceError(f"{target}: cannot write: {e.strerror or e}") from e
        raise
    return target


def digest_file(path: Path) -> tuple[str, int]:
    """Hex SHA-256 and size of a file, read in 1 MiB blocks."""
    digest = hashlib.sha256()
    size = 0
    with path.open("rb") as handle:
        while block := handle.read(_BLOCK):
            digest.update(block)
            size += len(block)
    return digest.hexdigest(), size


def sha256_file(path: Path) -> str:
    """Hex SHA-256 of a file."""
    return digest_file(path)[0]
