"""Finding artifacts: files, folders (recursively), static archive members, wheel members.

Classification is by content, never by name alone: ELF (``\\x7fELF``), ``ar`` archives
(``!<arch>\\n``), raw fatbins (container magic) and zip files (wheels). Wheel members
are read from the zip into memory, never extracted to disk; a member whose declared
size is past :data:`MAX_MEMBER` is refused rather than read.
"""

from __future__ import annotations

import os
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from gate.errors import BadInputError
from gate.reader.elffile import ELF_MAGIC, Buffer
from gate.reader.fatbin import CONTAINER_PREFIX

if TYPE_CHECKING:  # zipfile is imported only when a wheel is read
    import zipfile

AR_MAGIC = b"!<arch>\n"
ZIP_MAGIC = b"PK\x03\x04"
MAX_MEMBER = 4 << 30
_AR_HEADER = 60
_CHUNK = 1 << 20


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


@dataclass(frozen=True, slots=True)
class Found:
    """A file to inspect and what its first bytes say it is (None: unrecognised)."""

    path: Path
    kind: str | None


def discover(paths: Sequence[str | os.PathLike[str]]) -> Iterator[Found | BadInputError]:
    """Each named file, and every recognised file under each named folder, in sorted order.

    A file named explicitly is always yielded (an unrecognised one gets ``kind`` None,
    so the caller can report it); inside folders only recognised files are, and a file
    reached twice through symlinks only once.
    """
    seen: set[str] = set()
    for raw in paths:
        path = Path(raw)
        if path.is_dir():
            for root, dirs, files in os.walk(path):
                dirs.sort()
                for name in sorted(files):
                    found = _probe(Path(root) / name, seen)
                    if isinstance(found, BadInputError) or (found and found.kind):
                        yield found
        elif path.exists():
            yield _probe(path, seen) or Found(path, "duplicate")
        else:
            yield BadInputError(f"{path}: no such file or folder")


def _probe(path: Path, seen: set[str]) -> Found | BadInputError | None:
    real = os.path.realpath(path)
    if real in seen or not Path(real).is_file():
        return None
    seen.add(real)
    try:
        with path.open("rb") as f:
            head = f.read(8)
    except OSError as e:
        return BadInputError(f"{path}: cannot read: {e.strerror or e}")
    return Found(path, classify(head))


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
        try:
            size = int(header[48:58].decode("ascii").strip() or "0")
        except ValueError as e:
            raise BadInputError(f"{name}: corrupted archive member size at {pos:#x}") from e
        data = pos + _AR_HEADER
        if size < 0 or data + size > end:
            raise BadInputError(f"{name}: archive member at {pos:#x} runs past the end")
        ident = header[:16].decode("utf-8", "replace").rstrip()
        if ident == "//":
            long_names = bytes(buf[data : data + size])
        elif ident.startswith("#1/"):  # BSD: the name follows the header
            length = int(ident[3:]) if ident[3:].isdigit() else 0
            member = bytes(buf[data : data + length]).rstrip(b"\0").decode("utf-8", "replace")
            yield member, data + length, size - length
        elif ident not in ("/", "/SYM64/", "__.SYMDEF", "__.SYMDEF SORTED"):
            yield _member_name(ident, long_names), data, size
        pos = data + size + (size & 1)


def _member_name(ident: str, long_names: bytes) -> str:
    if ident.startswith("/") and ident[1:].isdigit():
        offset = int(ident[1:])
        end = long_names.find(b"/\n", offset)
        return long_names[offset : end if end >= 0 else None].decode("utf-8", "replace")
    return ident.rstrip("/")


def wheel_members(archive: zipfile.ZipFile) -> list[zipfile.ZipInfo]:
    """Members worth reading: shared libraries (``.so``, ``.so.N``), cubins and fatbins."""
    wanted = []
    for info in archive.infolist():
        base = info.filename.rsplit("/", 1)[-1]
        if info.is_dir():
            continue
        shared = base.endswith(".so") or ".so." in base
        if shared or base.endswith((".cubin", ".fatbin")):
            wanted.append(info)
    return wanted


def read_member(archive: zipfile.ZipFile, info: zipfile.ZipInfo, name: str) -> bytearray:
    """A wheel member's bytes, read into one buffer of its declared size (no second copy).

    BadInputError for a broken member, an oversized one, or one whose data does not
    match its declared size.
    """
    import lzma  # noqa: PLC0415  (wheels only)
    import zipfile  # noqa: PLC0415
    import zlib  # noqa: PLC0415

    if info.file_size > MAX_MEMBER:
        raise BadInputError(f"{name}: member declares {info.file_size} bytes; refusing")
    data = bytearray(info.file_size)
    view = memoryview(data)
    filled = 0
    try:
        with archive.open(info) as member:
            while filled < len(data):
                chunk = member.read(min(_CHUNK, len(data) - filled))
                if not chunk:
                    break
                view[filled : filled + len(chunk)] = chunk
                filled += len(chunk)
            extra = member.read(1)  # also makes zipfile check the CRC at the end
    except (zipfile.BadZipFile, zipfile.LargeZipFile, zlib.error, lzma.LZMAError) as e:
        raise BadInputError(f"{name}: broken zip member: {e}") from e
    except (EOFError, OSError, ValueError) as e:
        raise BadInputError(f"{name}: broken zip member: {e}") from e
    except NotImplementedError as e:
        raise BadInputError(f"{name}: unsupported zip compression: {e}") from e
    finally:
        view.release()
    if filled != len(data) or extra:
        raise BadInputError(f"{name}: broken zip member: size differs from the declared one")
    return data
