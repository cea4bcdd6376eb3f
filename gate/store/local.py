"""The embedded default store: a local folder with the same key layout as the bucket.

Files are written to a temporary name, verified, made read-only, then hard-linked
into place: ``link(2)`` fails when the name exists, so nothing is ever replaced,
and a reader never sees half a file.
"""

from __future__ import annotations

import hashlib
import os
import stat
import uuid
from collections.abc import Iterator
from pathlib import Path

from gate.errors import StorageError
from gate.fsutil import digest_file
from gate.store.base import EvidenceStore, ObjectExistsError, PutOutcome
from gate.store.records import copy_with_digest

_TMP_MARK = ".tmp-"
_BLOCK = 1 << 20


class LocalStore(EvidenceStore):
    """Evidence kept in a folder: ``<root>/<owner>/<repo>/<revision>/<runner>/<run-id>/``."""

    def __init__(self, root: Path) -> None:
        self.root = root

    def describe(self) -> str:
        """The folder."""
        return str(self.root)

    def check(self) -> None:
        """Create the folder if needed and make sure it is writable."""
        try:
            self.root.mkdir(parents=True, exist_ok=True)
        except OSError as e:
            raise StorageError(
                f"cannot create the evidence folder {self.root}: {e.strerror}"
            ) from e
        if not os.access(self.root, os.W_OK | os.X_OK):
            raise StorageError(f"the evidence folder {self.root} is not writable")

    def _path(self, key: str) -> Path:
        return self.root.joinpath(*key.split("/"))

    def put_file(self, key: str, path: Path, sha256: str, size: int) -> PutOutcome:
        """Copy ``path`` in, hashing the copy, and link it into place unless the key exists."""
        dest = self._path(key)
        if dest.is_symlink() or dest.exists():
            return self._compare_existing(dest, key, sha256, size)
        tmp = dest.with_name(f"{_TMP_MARK}{uuid.uuid4().hex}")
        try:
            dest.parent.mkdir(parents=True, exist_ok=True)
            read, written = copy_with_digest(path, tmp)
            if (read, written) != (sha256, size):
                raise StorageError(
                    f"{path} changed while it was stored: expected sha256 {sha256} "
                    f"({size} bytes), read {read} ({written} bytes)"
                )
            return self._link(tmp, dest, key, sha256, size)
        except OSError as e:
            raise StorageError(f"cannot write {dest}: {e.strerror or e}") from e
        finally:
            tmp.unlink(missing_ok=True)

    def put_bytes(self, key: str, data: bytes) -> PutOutcome:
        """Write a small object the same way as a file."""
        dest = self._path(key)
        sha = hashlib.sha256(data).hexdigest()
        if dest.is_symlink() or dest.exists():
            return self._compare_existing(dest, key, sha, len(data))
        tmp = dest.with_name(f"{_TMP_MARK}{uuid.uuid4().hex}")
        try:
            dest.parent.mkdir(parents=True, exist_ok=True)
            with tmp.open("xb") as out:
                out.write(data)
                out.flush()
                os.fsync(out.fileno())
            return self._link(tmp, dest, key, sha, len(data))
        except OSError as e:
            raise StorageError(f"cannot write {dest}: {e.strerror or e}") from e
        finally:
            tmp.unlink(missing_ok=True)

    def _link(self, tmp: Path, dest: Path, key: str, sha256: str, size: int) -> PutOutcome:
        tmp.chmod(0o444)
        try:
            os.link(tmp, dest)
        except FileExistsError:
            # Someone else stored the key between our check and the link.
            return self._compare_existing(dest, key, sha256, size)
        return PutOutcome.STORED

    def _compare_existing(self, dest: Path, key: str, sha256: str, size: int) -> PutOutcome:
        """PRESENT when the file there holds these bytes (hashed on disk); else refuse."""
        try:
            # A link in the store (to anything, even identical bytes) is not stored evidence.
            if not stat.S_ISREG(dest.lstat().st_mode):
                raise ObjectExistsError(
                    f"refusing to overwrite {self.location(key)}: it is not a regular file"
                )
            found = digest_file(dest)
        except OSError as e:
            raise StorageError(f"cannot read {dest}: {e.strerror or e}") from e
        if found == (sha256, size):
            return PutOutcome.PRESENT
        raise ObjectExistsError(
            f"refusing to overwrite {self.location(key)}: it already holds different content "
            f"(sha256 {found[0]}, {found[1]} bytes)"
        )

    def get_bytes(self, key: str) -> bytes | None:
        """The file's content, or None when it does not exist."""
        try:
            return self._path(key).read_bytes()
        except FileNotFoundError:
            return None
        except OSError as e:
            raise StorageError(f"cannot read {self._path(key)}: {e.strerror or e}") from e

    def get_file(self, key: str, dest: Path) -> tuple[str, int]:
        """Copy the file out, hashing what was written.

        Only reading the store is a StorageError. Writing ``dest`` (a full disk, a
        read-only folder) fails with the OSError itself, as the S3 store's download
        does: the caller knows which folder that is, and it is not the store's fault.
        """
        source = self._path(key)
        try:
            src = source.open("rb")
        except FileNotFoundError as e:
            raise StorageError(f"{source} is missing from the evidence store") from e
        except OSError as e:
            raise StorageError(f"cannot read {source}: {e.strerror or e}") from e
        with src, dest.open("wb") as out:
            while True:
                try:
                    block = src.read(_BLOCK)
                except OSError as e:
                    raise StorageError(f"cannot read {source}: {e.strerror or e}") from e
                if not block:
                    break
                out.write(block)
        return digest_file(dest)

    def list_keys(self, prefix: str) -> Iterator[str]:
        """Every stored file below ``prefix``, skipping unfinished temporary files."""
        base = self._path(prefix)
        if not base.is_dir():
            return
        for path in base.rglob("*"):
            if path.is_file() and not path.name.startswith(_TMP_MARK):
                yield path.relative_to(self.root).as_posix()
