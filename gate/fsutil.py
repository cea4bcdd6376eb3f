"""The one atomic file writer, the one SHA-256 of a file and its record, and the one folder lock.

Every machine-readable file cuda-gate writes (evidence, result.json, manifests,
indexes, keys, reports) goes through :func:`write_atomic` (or, streamed,
:func:`atomic_file`): a temp file in the same folder, synced, then ``os.replace``; a
crash leaves either the old file or the new one, never half of either, and the temp
file never outlives a failure.
"""

from __future__ import annotations

import errno
import fcntl
import hashlib
import io
import os
import stat
import tempfile
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, BinaryIO

from gate.errors import BadInputError, EvidenceError

_BLOCK = 1 << 20
# How much of a lock holder's command line an error shows.
_COMMAND_SHOWN = 120


def write_atomic(target: Path, data: bytes, *, mode: int = 0o644) -> Path:
    """Write ``data`` to ``target`` atomically; EvidenceError naming the file on failure.

    The temp file gets ``mode`` before any byte is written, so a private key is
    never readable by others, not even briefly.
    """
    with atomic_file(target, mode=mode) as handle:
        handle.write(data)
    return target


@contextmanager
def atomic_file(target: Path, *, mode: int = 0o644) -> Iterator[BinaryIO]:
    """A file to write ``target`` through, in pieces: in place, synced, once the block ends.

    As :func:`write_atomic`, for what is streamed rather than held whole (a wheel's
    libraries, hundreds of MB each). Nothing replaces ``target`` if the block raises.
    """
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=target.parent, prefix=f".{target.name}.")
    except OSError as e:
        raise EvidenceError(f"{target}: cannot write: {e.strerror or e}") from e
    try:
        os.fchmod(fd, mode)
        with os.fdopen(fd, "wb") as handle:
            yield handle
            handle.flush()
            os.fsync(handle.fileno())
        Path(tmp).replace(target)
    except BaseException as e:
        Path(tmp).unlink(missing_ok=True)
        if isinstance(e, OSError):
            raise EvidenceError(f"{target}: cannot write: {e.strerror or e}") from e
        raise


def digest_file(path: Path) -> tuple[str, int]:
    """Hex SHA-256 and size of a file, read in 1 MiB blocks."""
    with path.open("rb") as handle:
        return _digest(handle)


def _digest(handle: BinaryIO) -> tuple[str, int]:
    digest = hashlib.sha256()
    size = 0
    while block := handle.read(_BLOCK):
        digest.update(block)
        size += len(block)
    return digest.hexdigest(), size


@dataclass(frozen=True)
class FileDigest:
    """One file as evidence records it: its name (a relative POSIX path), SHA-256 and size.

    The one record of a digested file: the manifest's predicate lists the evidence with
    these, and so does the store's index. Each document keeps its own key for the name
    (the predicate ``name``, the index ``path``): :meth:`to_json` takes it.
    """

    name: str
    sha256: str
    size: int

    @classmethod
    def of_file(cls, name: str, path: Path, *, plain: bool = False) -> FileDigest:
        """The digest of the file at ``path``, recorded as ``name`` (OSError when unreadable).

        ``plain``: opened through :func:`open_regular` (a link or a special file is a
        BadInputError), for a folder that may have been tampered with.
        """
        with open_regular(path) if plain else path.open("rb") as handle:
            sha256, size = _digest(handle)
        return cls(name, sha256, size)

    @classmethod
    def of_bytes(cls, name: str, data: bytes) -> FileDigest:
        """The digest of ``data``, recorded as ``name``."""
        return cls(name, hashlib.sha256(data).hexdigest(), len(data))

    def to_json(self, key: str = "name") -> dict[str, Any]:
        """``{key: name, "sha256": ..., "size": ...}``: the document's key for the name."""
        return {key: self.name, "sha256": self.sha256, "size": self.size}


def sha256_file(path: Path) -> str:
    """Hex SHA-256 of a file."""
    return digest_file(path)[0]


class Lock:
    """An exclusive ``flock`` on one file, held until :meth:`release` (or the process ends).

    The kernel drops it when the holder dies, so a crashed run never leaves a stale lock;
    the descriptor is not inherited by children (PEP 446), so a process a run leaves
    behind cannot keep holding it.
    """

    def __init__(self, fd: int, path: Path) -> None:
        self.fd, self.path = fd, path

    @classmethod
    def acquire(
        cls,
        path: Path,
        what: str,
        *,
        wait: bool = False,
        say: Callable[[str], None] | None = None,
        create: bool = True,
    ) -> Lock:
        """Lock ``path`` (created if absent unless ``create`` is false; never truncated,
        never through a link).

        Busy: EvidenceError naming ``what`` and the holder's pid and command, or with
        ``wait`` a line through ``say`` and a wait until the holder is done. A file
        replaced while waiting (its folder emptied and made again) is locked afresh.
        """
        while True:
            try:
                flags = os.O_RDWR | os.O_NOFOLLOW | (os.O_CREAT if create else 0)
                fd = os.open(path, flags, 0o644)
            except OSError as e:
                raise EvidenceError(f"{path}: cannot open the lock: {e.strerror or e}") from e
            try:
                try:
                    fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                except BlockingIOError:
                    holder = lock_holder(os.fstat(fd).st_ino)
                    if not wait:
                        raise EvidenceError(
                            f"{what}: in use by another cuda-gate run ({holder})",
                            hint="wait for it with --wait, or choose another folder",
                        ) from None
                    if say is not None:
                        say(f"waiting for {holder} to finish with {what} ...")
                    fcntl.flock(fd, fcntl.LOCK_EX)
                if _same_file(fd, path):
                    return cls(fd, path)
            except BaseException:
                os.close(fd)
                raise
            os.close(fd)  # the file was replaced while we waited: lock the new one

    def release(self) -> None:
        """Give the lock up (closing the descriptor); a second call does nothing."""
        if self.fd >= 0:
            os.close(self.fd)
            self.fd = -1

    def __del__(self) -> None:
        """A lock nobody holds any more is given up with its last reference."""
        self.release()


def _same_file(fd: int, path: Path) -> bool:
    try:
        now = path.lstat()
    except OSError:
        return False
    held = os.fstat(fd)
    return (now.st_dev, now.st_ino) == (held.st_dev, held.st_ino)


def lock_holder(inode: int, locks: Path = Path("/proc/locks")) -> str:
    """``pid N: command`` of the process holding a flock on ``inode`` (from /proc/locks)."""
    try:
        lines = locks.read_text(encoding="ascii", errors="replace").splitlines()
    except OSError:
        lines = []
    for line in lines:
        fields = line.split()
        # A holder's line: number, FLOCK, ADVISORY, WRITE, pid, major:minor:inode, ...
        if len(fields) >= 6 and fields[1] == "FLOCK" and fields[5].endswith(f":{inode}"):
            pid = fields[4]
            try:
                raw = Path(f"/proc/{pid}/cmdline").read_bytes()
            except OSError:
                return f"pid {pid}"
            command = " ".join(part.decode(errors="replace") for part in raw.split(b"\0") if part)
            if len(command) > _COMMAND_SHOWN:
                command = command[: _COMMAND_SHOWN - 3] + "..."
            return f"pid {pid}: {command}" if command else f"pid {pid}"
    return "holder unknown"


def open_regular(path: Path) -> io.BufferedReader:
    """Open a regular file for reading, never through a symbolic link, never blocking on a FIFO.

    BadInputError naming the file for a link or anything but a regular file: evidence
    is plain files, and a link swapped in after a folder was checked is refused here.
    """
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError as e:
        if e.errno == errno.ELOOP:
            raise BadInputError(
                f"{path}: a symbolic link (evidence is plain files; links are never followed)"
            ) from e
        raise
    handle = os.fdopen(fd, "rb")
    if not stat.S_ISREG(os.fstat(fd).st_mode):
        handle.close()
        raise BadInputError(f"{path}: not a regular file (evidence is plain files)")
    return handle


# Free space below which a file system counts as full: a build that failed beside it
# most likely failed for it. Small enough that no working disk is ever named.
FULL_BELOW = 1 << 20
ENOSPC_TEXT = os.strerror(errno.ENOSPC)  # "No space left on device", as tools print it


def mount_point(path: Path) -> Path:
    """The folder ``path``'s file system is mounted at: the highest parent on its device."""
    path = path.resolve()
    device = path.stat().st_dev
    while path.parent != path and path.parent.stat().st_dev == device:
        path = path.parent
    return path


def full_file_systems(folders: Iterator[Path] | tuple[Path, ...], output: str) -> str | None:
    """What names the full file system a failed command wrote to, or None.

    1. ``statvfs`` of each folder (the build's folder, its temporary folder): one with
       less than :data:`FULL_BELOW` free is named with its mount point, even where the
       tool said nothing about it (nvcc with a full TMPDIR says only "Failed to
       preprocess host compiler properties").
    2. Else ENOSPC in the command's output: the disk was full when it wrote, though the
       tool's removal of its partial output may have freed it since.
    """
    named: dict[Path, str] = {}
    for folder in folders:
        try:
            info = os.statvfs(folder)
            mount = mount_point(folder)
        except OSError:
            continue
        free = info.f_bavail * info.f_frsize
        if free < FULL_BELOW and mount not in named:
            named[mount] = (
                f"the file system of {folder} (mounted at {mount}) is full: {free} bytes free"
            )
    if named:
        return "; ".join(named.values())
    if ENOSPC_TEXT in output:
        return f"the build's output says {ENOSPC_TEXT}: a file system it wrote to was full"
    return None
