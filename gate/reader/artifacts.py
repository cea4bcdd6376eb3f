"""Finding artifacts: files, folders (recursively), static archive members, wheel members.

Classification is by content, never by name alone: ELF (``\\x7fELF``), ``ar`` archives
(``!<arch>\\n``), raw fatbins (container magic) and zip files (wheels). A wheel member
is streamed out of the zip into a file (the reader's is an unnamed temporary one), so
memory never grows with the member, within the bounds of
:class:`gate.reader.limits.Limits` (measured on what is written, not on claims).
"""

from __future__ import annotations

import io
import mmap
import os
import re
import stat
import struct
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, BinaryIO, Final, Protocol

from gate.errors import BadInputError
from gate.reader.elffile import ELF_MAGIC, Buffer
from gate.reader.fatbin import CONTAINER_PREFIX
from gate.reader.limits import Limits, hint

if TYPE_CHECKING:  # zipfile is imported only when a wheel is read
    import zipfile

AR_MAGIC = b"!<arch>\n"
ZIP_MAGIC = b"PK\x03\x04"
_AR_HEADER = 60
# Small pieces: the zip reader reads ahead about one piece of compressed data, and the
# ratio check compares against what it has consumed.
_CHUNK = 64 << 10
_ZIP_ENCRYPTED = 0x1
# Where an inflated member goes, for an error saying there is no room.
_WHERE = "a temporary file; TMPDIR chooses its folder"
_CONTROL = re.compile(r"[\x00-\x1f\x7f]")
# What zipfile and the decompressors under it raise for a corrupted or unsupported file
# (found by fuzzing real wheels: a bad central directory reaches struct, a bad local
# header ValueError, an unknown method NotImplementedError, encryption RuntimeError);
# zipfile's, zlib's and lzma's own are added where a zip is opened (imported lazily).
_ZIP_ERRORS: tuple[type[BaseException], ...] = (
    OSError,
    EOFError,
    ValueError,
    NotImplementedError,
    RuntimeError,
    OverflowError,
    IndexError,
    KeyError,
    struct.error,
)


def classify(head: bytes | bytearray) -> str | None:
    """``elf``, ``archive``, ``fatbin``, ``zip`` or None from a file's first 8 bytes."""
    if head.startswith(ELF_MAGIC):
        return "elf"
    if head.startswith(AR_MAGIC):
        return "archive"
    if head.startswith(CONTAINER_PREFIX):
        return "fatbin"
    if head.startswith(ZIP_MAGIC):
        return "zip"
    return None


# What a walk's memo answers for a file it does not know (unlike None: "known, and no
# artifact").
MISS: Final = object()


class Memo(Protocol):
    """What a walk remembers of a folder tree's files (gate.scan.walkcache.Kinds keeps
    it between audits): a file unchanged since is not opened again."""

    def kind(self, real: str, st: os.stat_result) -> tuple[object, str | None, object]:
        """What the file at ``real`` is (a kind, or None), its SHA-256 and its kept report
        when known, if unchanged since; else ``(MISS, None, None)``."""
        ...

    def remember(self, real: str, st: os.stat_result, kind: str | None) -> None:
        """The answer the file's first bytes gave, with the identity taken before."""
        ...


@dataclass(frozen=True, slots=True)
class Found:
    """A file to inspect and what its first bytes say it is (None: unrecognised); found
    in a folder, its real path too (the walk knows it: the cache's identities use it)."""

    path: Path
    kind: str | None
    real: str | None = None
    # The SHA-256 and size a walk remembered for the file's unchanged identity (the
    # cache's report for those bytes can be taken without opening it), else None.
    digest: str | None = None
    size: int = 0
    # Its report as the walk's document kept it (a cache document's "report"), if it did.
    report: object = field(default=None, compare=False, repr=False)


@dataclass(frozen=True, slots=True)
class Unreadable:
    """A named path that is not something to read: its display name and why, in one line."""

    path: str
    message: str


def shown(path: str | os.PathLike[str]) -> str:
    """``path`` as text safe to print and to put in JSON, on one line.

    Bytes that are not UTF-8 (kept by Python as lone surrogates) become ``\\xNN``, and
    control characters (a newline in a file name) ``\\xNN`` too: every message stays one
    line and no output stream can fail to encode it.
    """
    text = os.fsdecode(path)
    if text.isascii() and text.isprintable():  # most paths: nothing to escape
        return text
    try:
        text = text.encode("utf-8", "surrogateescape").decode("utf-8", "backslashreplace")
    except UnicodeEncodeError:  # a lone surrogate that did not come from a file name
        text = text.encode("utf-8", "backslashreplace").decode("utf-8")
    return _CONTROL.sub(lambda m: f"\\x{ord(m.group(0)):02x}", text)


def discover(
    paths: Sequence[str | os.PathLike[str]], memo: Memo | None = None
) -> Iterator[Found | Unreadable]:
    """Each named file, and every recognised file under each named folder, in sorted order.

    A file named explicitly is always yielded (an unrecognised one gets ``kind`` None,
    so the caller can report it); a named path that is not a regular file or folder (a
    device such as /dev/null, a FIFO, a socket) is reported, never opened (a FIFO would
    block). Inside folders only recognised regular files are yielded, and a file
    reached twice through symlinks only once. With ``memo`` (gate.scan.walkcache), a
    plain file in a folder that is unchanged since a walk before is not opened.
    """
    seen: set[str] = set()
    for raw in paths:
        path = Path(raw)
        try:
            mode = path.stat().st_mode
        except FileNotFoundError:
            yield Unreadable(shown(path), f"{shown(path)}: no such file or folder")
            continue
        except OSError as e:
            yield Unreadable(shown(path), f"{shown(path)}: cannot read: {e.strerror or e}")
            continue
        if stat.S_ISDIR(mode):
            yield from _folder(os.fspath(path), os.path.realpath(path), seen, memo)
        elif stat.S_ISREG(mode):
            yield _probe(path, seen) or Found(path, "duplicate")
        else:
            yield Unreadable(shown(path), f"{shown(path)}: not a regular file ({file_kind(mode)})")


def _folder(
    folder: str, real: str, seen: set[str], memo: Memo | None = None
) -> Iterator[Found | Unreadable]:
    """The recognised files under ``folder`` (whose real path is ``real``), as os.walk
    visits them: a folder's files in sorted order, then its subfolders in sorted order;
    symlinked folders are not entered, folders that cannot be listed are passed over.

    Tens of thousands of files (an environment with torch and vllm: 60,000) are each
    opened for their first bytes: everything else per file is kept off the system. A
    plain file's real path is its real folder's and its name (the walk never enters a
    symlink, so no path component needs resolving again); only a symlink is resolved.
    """
    try:
        with os.scandir(folder) as listing:
            entries = list(listing)
    except OSError:
        return
    files, dirs = [], []
    for entry in entries:
        try:
            is_dir = entry.is_dir()
        except OSError:
            is_dir = False
        if is_dir:
            dirs.append(entry)
        else:
            files.append(entry)
    for entry in sorted(files, key=_name):
        found = _probe_entry(entry, real, seen, memo)
        if isinstance(found, Unreadable) or (found and found.kind):
            yield found
    for entry in sorted(dirs, key=_name):
        if not entry.is_symlink():
            # os.path.join, not Path: this runs once per folder and file of a tree.
            yield from _folder(entry.path, os.path.join(real, entry.name), seen, memo)  # noqa: PTH118


def _name(entry: os.DirEntry[str]) -> str:
    return entry.name


def _probe_entry(
    entry: os.DirEntry[str], folder: str, seen: set[str], memo: Memo | None = None
) -> Found | Unreadable | None:
    """A folder's entry probed as :func:`_probe` does, without its syscalls where the
    entry's type says enough: a plain (not symlinked) regular file needs no resolving
    and no stat before it is opened, and with ``memo`` one unchanged since is not opened."""
    try:
        plain = not entry.is_symlink() and entry.is_file(follow_symlinks=False)
    except OSError:
        plain = False
    if not plain:
        return _probe(Path(entry.path), seen)
    real = os.path.join(folder, entry.name)  # noqa: PTH118  (per file: kept cheap)
    if real in seen:
        return None
    seen.add(real)
    st = _stat(entry) if memo is not None else None
    if memo is not None and st is not None:
        known, digest, report = memo.kind(real, st)
        if known is not MISS:
            was = known if isinstance(known, str) else None
            return Found(Path(entry.path), was, real, digest, st.st_size, report) if was else None
    kind = _kind(entry.path)
    if isinstance(kind, Unreadable):
        return kind
    if memo is not None and st is not None:
        memo.remember(real, st, kind)
    # A Path only for what is yielded: most files of an environment are not artifacts.
    return Found(Path(entry.path), kind, real) if kind else None


def _stat(entry: os.DirEntry[str]) -> os.stat_result | None:
    try:
        return entry.stat(follow_symlinks=False)
    except OSError:
        return None


def file_kind(mode: int) -> str:
    """What a non-regular file is, in words (``a FIFO``), from its ``st_mode``."""
    kinds = (
        (stat.S_ISCHR, "a character device"),
        (stat.S_ISBLK, "a block device"),
        (stat.S_ISFIFO, "a FIFO"),
        (stat.S_ISSOCK, "a socket"),
    )
    return next((text for test, text in kinds if test(mode)), "not a file")


def open_regular(path: str | os.PathLike[str], name: str) -> BinaryIO:
    """``path`` opened for reading, without ever blocking; BadInputError if not a regular file.

    O_NONBLOCK makes opening a FIFO return at once instead of waiting for a writer;
    the type is then checked on the open descriptor, so a file swapped for a FIFO or
    a device after it was listed is refused too.
    """
    flags = os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_CLOEXEC", 0)
    fd = os.open(path, flags)
    try:
        mode = os.fstat(fd).st_mode
    except OSError:
        os.close(fd)
        raise
    if not stat.S_ISREG(mode):
        os.close(fd)
        raise BadInputError(f"{name}: not a regular file ({file_kind(mode)})")
    return os.fdopen(fd, "rb")


def _probe(path: Path, seen: set[str]) -> Found | Unreadable | None:
    real = os.path.realpath(path)
    if real in seen or not Path(real).is_file():
        return None
    seen.add(real)
    return _head(path, real)


def _head(path: Path, real: str | None = None) -> Found | Unreadable:
    """``path`` classified by its first bytes; Unreadable when it cannot be read or is
    no regular file."""
    kind = _kind(path)
    return kind if isinstance(kind, Unreadable) else Found(path, kind, real)


def _kind(path: str | Path) -> str | Unreadable | None:
    """What :func:`classify` says of ``path``'s first bytes; Unreadable when it cannot be
    read or is no regular file (checked on the open descriptor, as :func:`open_regular`
    does)."""
    flags = os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_CLOEXEC", 0)
    try:
        fd = os.open(path, flags)
        try:
            mode = os.fstat(fd).st_mode
            if not stat.S_ISREG(mode):
                name = shown(path)
                return Unreadable(name, f"{name}: not a regular file ({file_kind(mode)})")
            head = os.read(fd, 8)
        finally:
            os.close(fd)
    except OSError as e:
        return Unreadable(shown(path), f"{shown(path)}: cannot read: {e.strerror or e}")
    return classify(head)


def archive_members(buf: Buffer, start: int, end: int, name: str) -> Iterator[tuple[str, int, int]]:
    """``(member name, offset, size)`` of each member of the ``ar`` archive in ``buf``."""
    if buf[start : start + 8] != AR_MAGIC:
        raise BadInputError(f"{name}: not an ar archive")
    long_names = b""
    pos = start + 8
    while pos + _AR_HEADER <= end:
        header = bytes(buf[pos : pos + _AR_HEADER])
        if header[58:60] != b"`\n":
            raise BadInputError(f"{name}: corrupted archive member header at {pos:#x}")
        size = _decimal(header[48:58].strip() or b"0")
        data = pos + _AR_HEADER
        if size is None:
            raise BadInputError(f"{name}: corrupted archive member size at {pos:#x}")
        if data + size > end:
            raise BadInputError(f"{name}: archive member at {pos:#x} runs past the end")
        ident = header[:16].rstrip(b" ")
        if ident == b"//":
            long_names = bytes(buf[data : data + size])
        elif ident.startswith(b"#1/"):  # BSD: the name follows the header
            length = _decimal(ident[3:])
            if length is None or length > size:
                raise BadInputError(f"{name}: corrupted archive member name at {pos:#x}")
            member = bytes(buf[data : data + length]).rstrip(b"\0")
            yield _text(member), data + length, size - length
        elif ident not in (b"/", b"/SYM64/", b"__.SYMDEF", b"__.SYMDEF SORTED"):
            yield _member_name(ident, long_names, name, pos), data, size
        pos = data + size + (size & 1)


def _decimal(field: bytes) -> int | None:
    """An ar header's decimal field, or None: only ASCII digits, as ar writes them.

    ``str.isdigit()`` is not enough: it accepts '²', which ``int()`` then refuses.
    """
    if not field or len(field) > 20 or not field.isdigit():  # bytes.isdigit is ASCII-only
        return None
    return int(field)


def _text(raw: bytes) -> str:
    return shown(raw.decode("utf-8", "replace"))


def _member_name(ident: bytes, long_names: bytes, name: str, pos: int) -> str:
    """A member's name: inline (``name/``), or ``/offset`` into the GNU long-name table."""
    if ident.startswith(b"/") and len(ident) > 1:
        offset = _decimal(ident[1:])
        if offset is None or offset >= len(long_names):
            raise BadInputError(f"{name}: corrupted archive member name at {pos:#x}")
        end = long_names.find(b"/\n", offset)
        return _text(long_names[offset : end if end >= 0 else None])
    return _text(ident.rstrip(b"/"))


def wheel_members(archive: zipfile.ZipFile) -> list[zipfile.ZipInfo]:
    """Members worth reading: shared libraries (``.so``, ``.so.N``), cubins and fatbins."""
    wanted = []
    for info in archive.infolist():
        base = info.filename.rsplit("/", 1)[-1]
        # Not info.is_dir(): it indexes filename[-1], and a crafted entry has no name.
        if not base:
            continue
        shared = base.endswith(".so") or ".so." in base
        if shared or base.endswith((".cubin", ".fatbin")):
            wanted.append(info)
    return wanted


class _CountingFile(io.FileIO):
    """A file that counts the bytes read from it: the compressed bytes a member consumed."""

    consumed = 0

    def read(self, size: int | None = -1, /) -> bytes:
        data = super().read(size)
        self.consumed += len(data or b"")
        return data or b""


@dataclass(frozen=True)
class Zip:
    """An open zip file and the file under it, which counts what decompression consumed."""

    zip: zipfile.ZipFile
    file: _CountingFile


def zip_errors() -> tuple[type[BaseException], ...]:
    """What reading a corrupted or unsupported zip (or a member of one) may raise."""
    import lzma  # noqa: PLC0415  (wheels only: keeps the common path's start-up short)
    import zipfile  # noqa: PLC0415
    import zlib  # noqa: PLC0415

    return (*_ZIP_ERRORS, zipfile.BadZipFile, zipfile.LargeZipFile, zlib.error, lzma.LZMAError)


@contextmanager
def open_zip(path: str | os.PathLike[str], name: str) -> Iterator[Zip]:
    """``path`` opened as a zip file; BadInputError (one line) if it is not a readable one."""
    import zipfile  # noqa: PLC0415  (wheels only: keeps the common path's start-up short)

    try:
        raw = open_regular(path, name)
    except OSError as e:
        raise BadInputError(f"{name}: cannot read: {e.strerror or e}") from e
    with raw:
        counting = _CountingFile(os.dup(raw.fileno()), "r")
    with counting:
        try:
            archive = zipfile.ZipFile(counting)
        except zip_errors() as e:
            raise BadInputError(f"{name}: not a readable zip/wheel: {_reason(e)}") from e
        with archive:
            yield Zip(archive, counting)


class ScratchError(BadInputError):
    """The temporary file a wheel member is inflated into could not be written.

    Not the wheel's fault, and the next member would fail the same way: the caller
    stops reading the wheel rather than reporting each member.
    """


def extract_member(
    archive: Zip, info: zipfile.ZipInfo, name: str, limits: Limits, out: BinaryIO
) -> int:
    """Inflate a wheel member (an ELF file or a fatbin, by its first bytes) into ``out``.

    Streamed in pieces of at most 64 kB, so memory never grows with the member; the
    member bound counts the bytes actually produced, never the size the zip claims (a
    claim past it is only refused early), and the member is refused once it has
    inflated more than ``limits.ratio`` times the bytes it consumed (a zip bomb); no
    byte past a bound is written. Returns the size written. BadInputError for an
    encrypted, broken or oversized member, one that is not an ELF file or a fatbin, or
    one whose data does not match its declared size; ``out``'s own OSError as it is.
    """
    written = 0
    for piece in _pieces(archive, info, name, limits):
        done = 0
        with memoryview(piece) as view:
            while done < len(view):  # an unbuffered file may take part of a piece
                done += out.write(view[done:])
        written += done
    if written != info.file_size:
        raise BadInputError(f"{name}: broken zip member: size differs from the declared one")
    return written


def _pieces(archive: Zip, info: zipfile.ZipInfo, name: str, limits: Limits) -> Iterator[bytes]:
    """The member's inflated bytes, piece by piece, each one checked before it is given."""
    if info.flag_bits & _ZIP_ENCRYPTED:
        raise BadInputError(f"{name}: encrypted zip member; cannot read it")
    if info.file_size > limits.member:
        raise BadInputError(
            f"{name}: member declares {info.file_size} bytes (limit {limits.member}); "
            f"refusing ({hint('member')})"
        )
    produced = 0
    # The zip's errors are caught here, where only the zip is read: the caller's write
    # errors (a full disk) never pass through this frame and keep their own meaning.
    try:
        with archive.zip.open(info) as member:
            archive.file.consumed = 0
            piece = member.read(8)
            if classify(piece) not in ("elf", "fatbin"):
                # Named like a library, cubin or fatbin but not one: say so rather than
                # skip it in silence (and never inflate the rest of it).
                raise BadInputError(
                    f"{name}: not an ELF file or fatbin (starts with {piece[:8].hex(' ')})"
                )
            while piece:
                produced += len(piece)
                if produced > limits.member:
                    raise BadInputError(
                        f"{name}: member inflates past {limits.member} bytes; "
                        f"refusing ({hint('member')})"
                    )
                if limits.refuse_ratio(produced, archive.file.consumed):
                    raise BadInputError(
                        f"{name}: member inflates more than {limits.ratio}:1 "
                        f"(a zip bomb?); refusing ({hint('ratio')})"
                    )
                yield piece
                piece = member.read(_CHUNK)
    except zip_errors() as e:
        raise BadInputError(f"{name}: broken zip member: {_reason(e)}") from e


@contextmanager
def inflated(archive: Zip, info: zipfile.ZipInfo, name: str, limits: Limits) -> Iterator[mmap.mmap]:
    """A wheel member inflated into an unnamed temporary file, mapped read-only.

    Memory is then what reading the same library as a plain file takes, whatever the
    member's size: the inflated bytes go through the page cache, never the heap. The
    file has no name (O_TMPFILE, else unlinked at once), so nothing is left behind, not
    even when the process is killed; it takes the member's size (at most
    ``limits.member``) on the disk of TMPDIR while it is read, one member at a time.
    """
    import tempfile  # noqa: PLC0415  (wheels only: keeps the common path's start-up short)

    try:
        # Unbuffered: a write that fails (a full disk) fails here, not again when it closes.
        scratch = tempfile.TemporaryFile(buffering=0, prefix="cuda-gate-member-")  # noqa: SIM115
    except OSError as e:
        raise ScratchError(
            f"{name}: cannot make a temporary file to inflate it into: {e.strerror or e} ({_WHERE})"
        ) from e
    with scratch:
        try:
            size = extract_member(archive, info, name, limits, scratch)
            buf = mmap.mmap(scratch.fileno(), size, access=mmap.ACCESS_READ)
        except OSError as e:
            raise ScratchError(
                f"{name}: cannot write the inflated member: {e.strerror or e} ({_WHERE})"
            ) from e
        with buf:
            yield buf


def _reason(e: BaseException) -> str:
    """An exception's text on one line (zipfile's messages can hold a ZipInfo's repr)."""
    return " ".join(str(e).split())[:200] or type(e).__name__
