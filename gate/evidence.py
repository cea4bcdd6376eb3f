"""The evidence folder: every stage writes its files here, atomically and redacted.

Files are written through one object so that (1) a folder that cannot be written
fails once, early, with one line; (2) every text passes the secret redactor; (3)
each write is atomic (:func:`gate.fsutil.write_atomic`), so a crash never leaves
half a file.

A folder is replaced by a new run only when the gate itself marked it as its
evidence folder (:data:`MARKER`); anything else is refused, however much it looks
like evidence: a user's folder that merely holds a ``result.json`` is never deleted.

Which files are a run's evidence is decided here, once (:func:`evidence_files`), for
the manifest that digests them, the store that takes them, ``verify`` that compares
them, and the run id made from them: every regular file but the hidden ones (the
marker, an atomic write's temporary file) and the statements written over the evidence
(:data:`STATEMENT_FILES`); a link or a special file anywhere in the folder is refused,
never followed.
"""

from __future__ import annotations

import contextlib
import os
import re
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import IO

from gate import jsonutil
from gate.errors import BadInputError, EvidenceError
from gate.fsutil import Lock, write_atomic
from gate.guard.redact import Redactor, StreamRedactor

DEFAULT_DIR = "gate-evidence"  # the evidence folder every command defaults to
MARKER = ".cuda-gate"
# The statements written over the evidence once it is digested: never evidence themselves.
MANIFEST_FILE = "manifest.json"
ENVELOPE_FILE = "manifest.dsse.json"
TEST_RESULT_FILE = "test-result.json"
TEST_RESULT_ENVELOPE = "test-result.dsse.json"
STATEMENT_FILES = frozenset({MANIFEST_FILE, ENVELOPE_FILE, TEST_RESULT_FILE, TEST_RESULT_ENVELOPE})
_LINK_HINT = "evidence is plain files; links are never followed"
_MARKER_TEXT = "cuda-gate evidence folder: replaced by the next run\n"


def mark(root: Path) -> None:
    """Mark ``root`` as a cuda-gate evidence folder (the next run may replace it).

    Tests mark the folders they fill as a run would; a run's own folder is marked (and
    locked) by :meth:`EvidenceDir.create`.
    """
    (root / MARKER).write_text(_MARKER_TEXT, encoding="utf-8")


def evidence_folder(root: Path) -> Path:
    """``root``'s marker path, once ``root`` is checked to be a folder and no link (the
    marker itself may be missing); BadInputError naming ``root`` otherwise."""
    if root.is_symlink():
        raise BadInputError(f"{root}: the evidence folder is a symbolic link ({_LINK_HINT})")
    if not root.is_dir():
        raise BadInputError(f"{root}: evidence folder not found")
    return root / MARKER


def is_plain_or_missing(path: Path) -> bool:
    """Whether ``path`` is a regular file or nothing: never a link, FIFO or folder (checked
    before anything reads it)."""
    return not path.is_symlink() and (path.is_file() or not path.exists())


def is_marked(root: Path) -> bool:
    """Whether ``root`` is a folder the gate made for its evidence."""
    try:
        return (root / MARKER).read_text(encoding="utf-8") == _MARKER_TEXT
    except (OSError, UnicodeDecodeError):
        return False


class EvidenceDir:
    """A folder of evidence files for one gate run."""

    def __init__(self, root: Path, redactor: Redactor | None = None) -> None:
        self.root = root
        self.redactor = redactor or Redactor.from_environment()
        self.lock: Lock | None = None

    @classmethod
    def create(
        cls,
        root: Path,
        redactor: Redactor | None = None,
        *,
        wait: bool = False,
        say: Callable[[str], None] | None = None,
    ) -> EvidenceDir:
        """Create (or replace an earlier run's) evidence folder, locked for this run.

        The lock is an flock on the marker, held until :meth:`release` (or the process
        ends): a second run into the same folder refuses with one line naming the
        holder (EvidenceError, exit 5), or with ``wait`` waits for it. The folder is
        emptied only once the lock is held, so two runs never mix their files.
        EvidenceError when the folder cannot be made or is not the gate's.
        """
        if root.is_symlink() or (root.exists() and not root.is_dir()):
            raise EvidenceError(f"{root}: evidence path exists and is not a folder")
        if root.is_dir() and any(root.iterdir()) and not is_marked(root):
            raise EvidenceError(
                f"{root}: folder is not empty and is not a cuda-gate evidence folder; "
                "refusing to replace it",
                hint="choose another --evidence folder",
            )
        try:
            root.mkdir(parents=True, exist_ok=True)
        except OSError as e:
            raise EvidenceError(f"{root}: evidence folder is not writable: {e.strerror}") from e
        lock = Lock.acquire(root / MARKER, f"{root} (evidence folder)", wait=wait, say=say)
        try:
            _empty(root)
            os.ftruncate(lock.fd, 0)
            os.pwrite(lock.fd, _MARKER_TEXT.encode("utf-8"), 0)
        except OSError as e:
            lock.release()
            raise EvidenceError(f"{root}: cannot replace earlier evidence: {e.strerror}") from e
        except BaseException:
            lock.release()
            raise
        made = cls(root, redactor)
        made.lock = lock
        return made

    def release(self) -> None:
        """Give up the folder's lock (the next run may replace it)."""
        if self.lock is not None:
            self.lock.release()

    def path(self, name: str) -> Path:
        """Absolute path of an evidence file (which may not exist yet)."""
        return self.root / name

    def write_text(self, name: str, text: str) -> Path:
        """Write a text file, secrets redacted, atomically."""
        return self.write_bytes(name, self.redactor.text(text).encode("utf-8"))

    def write_json(self, name: str, data: object) -> Path:
        """Write a JSON document (sorted keys, trailing newline), secrets redacted."""
        return self.write_text(name, jsonutil.dumps(data))

    def write_bytes(self, name: str, data: bytes) -> Path:
        """Write raw bytes atomically. Callers pass text through write_text."""
        return write_atomic(self.path(name), data)

    def live(self, name: str, head: str) -> LiveLog:
        """A log written while its command runs (``head`` first), for ``tail -f``; the
        final :meth:`write_text` of ``name`` replaces it, whole."""
        return LiveLog(self.path(name), self.redactor, head)


class LiveLog:
    """An evidence log written as its command's output comes: the one file not written
    atomically, because a person watches it grow; secrets are redacted as it goes.

    A log that cannot be written stays unwritten without an error: the final, atomic
    write of the same file reports the problem, once. Use as a context manager.
    """

    def __init__(self, path: Path, redactor: Redactor, head: str) -> None:
        self.path = path
        self.stream = StreamRedactor(redactor)
        try:
            # Never through a link a build left in its place (the evidence refuses links).
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW, 0o644)
            self.file: IO[str] | None = open(fd, "w", encoding="utf-8", errors="replace")  # noqa: PTH123, SIM115 - closed in close()
        except OSError:
            self.file = None
        self.write(head)

    def write(self, text: str) -> None:
        """Append ``text``, redacted (a possible secret's start waits for what follows)."""
        self._put(self.stream.feed(text))

    def close(self) -> None:
        """Write what was held back and close the file."""
        self._put(self.stream.end())
        if self.file is not None:
            with contextlib.suppress(OSError):
                self.file.close()
            self.file = None

    def _put(self, text: str) -> None:
        if self.file is None or not text:
            return
        try:
            self.file.write(text)
            self.file.flush()
        except OSError:
            with contextlib.suppress(OSError):
                self.file.close()
            self.file = None

    def __enter__(self) -> LiveLog:
        return self

    def __exit__(self, *_exc: object) -> None:
        self.close()


def _empty(root: Path) -> None:
    """Remove everything in ``root`` but the marker (whose lock this run holds)."""
    for entry in os.scandir(root):
        path = Path(entry.path)
        if entry.name == MARKER:
            continue
        if entry.is_dir(follow_symlinks=False):
            shutil.rmtree(path)
        else:
            path.unlink()


def walk(root: Path) -> tuple[str, ...]:
    """Every regular file below ``root``, as sorted relative POSIX names.

    BadInputError naming a symbolic link (never followed, so nothing outside the folder
    can pass as its evidence) or anything not a regular file or folder (a FIFO would
    block a reader).
    """
    names: list[str] = []
    folders = [root]
    while folders:
        folder = folders.pop()
        try:
            with os.scandir(folder) as entries:
                listed = list(entries)
        except OSError as e:
            raise BadInputError(f"{folder}: cannot list the evidence: {e.strerror or e}") from e
        for entry in listed:
            path = Path(entry.path)
            if entry.is_symlink():
                raise BadInputError(
                    f"{path}: a symbolic link in the evidence folder ({_LINK_HINT})"
                )
            if entry.is_dir(follow_symlinks=False):
                folders.append(path)
            elif entry.is_file(follow_symlinks=False):
                names.append(path.relative_to(root).as_posix())
            else:
                raise BadInputError(f"{path}: not a regular file (evidence is plain files)")
    return tuple(sorted(names))


def is_evidence(name: str) -> bool:
    """Whether the file ``name`` (relative to the folder) is part of a run's evidence."""
    return name not in STATEMENT_FILES and not any(p.startswith(".") for p in name.split("/"))


def evidence_files(root: Path) -> tuple[str, ...]:
    """A run's evidence: every file :func:`walk` finds that :func:`is_evidence` keeps."""
    return tuple(name for name in walk(root) if is_evidence(name))


_UNSAFE = re.compile(r"[^A-Za-z0-9._-]+")


def safe_name(name: str) -> str:
    """``name`` as one evidence file-name part: letters, digits and ``._-`` only."""
    return _UNSAFE.sub("_", name).strip("_") or "artifact"


def unique_name(name: str, seen: set[str]) -> str:
    """``safe_name(name)``, with ``-2``, ``-3``... appended when ``seen`` already holds it."""
    base = safe_name(name)
    candidate, n = base, 1
    while candidate in seen:
        n += 1
        candidate = f"{base}-{n}"
    seen.add(candidate)
    return candidate
