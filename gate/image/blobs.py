"""Blobs of an image: found in a folder or a tarball, and verified while they are read.

Every blob is named by its digest; what is read is hashed as it streams and compared
with the descriptor at the end (and its size too, where the descriptor gives one): a
mismatch is one line naming the blob. Layers are decompressed as streams (gzip by zlib,
zstd by the ``zstandard`` package the fatbin reader uses too), recognised by their first
bytes rather than by the media type a tool wrote, and never held whole in memory.
"""

from __future__ import annotations

import gzip
import hashlib
import io
import json
import re
import tarfile
import zlib
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any, Protocol

from gate.errors import BadInputError
from gate.reader.artifacts import shown
from gate.reader.limits import MB, Limits, hint

_DIGEST = re.compile(r"^sha256:[0-9a-f]{64}$")
# Manifests, indexes and configs are small; a "manifest" past this is not one.
JSON_LIMIT = 16 * MB
_CHUNK = 1 << 20
_LINK_HOPS = 16
GZIP_MAGIC = b"\x1f\x8b"
ZSTD_MAGIC = b"\x28\xb5\x2f\xfd"


def check_digest(text: object, where: str) -> str:
    """``sha256:<64 hex>`` as given; BadInputError naming ``where`` otherwise."""
    if not isinstance(text, str) or not _DIGEST.match(text):
        raise BadInputError(f"{where}: not a sha256 digest: {shown(str(text))[:80]}")
    return text


def blob_path(digest: str) -> str:
    """Where a blob lives inside an OCI layout: ``blobs/sha256/<hex>``."""
    algorithm, _, hexdigest = digest.partition(":")
    return f"blobs/{algorithm}/{hexdigest}"


class Store(Protocol):
    """The files of a layout or an archive, by their path inside it."""

    name: str

    def open(self, path: str) -> IO[bytes]:
        """The file at ``path`` (``index.json``, ``blobs/sha256/...``); BadInputError if absent."""
        ...

    def exists(self, path: str) -> bool:
        """Whether ``path`` is a regular file of the store."""
        ...

    def size(self, path: str) -> int:
        """The size of the file at ``path``."""
        ...


class FolderStore:
    """An OCI image layout on disk."""

    def __init__(self, root: Path, name: str) -> None:
        self.root, self.name = root, name

    def _path(self, path: str) -> Path:
        return self.root / clean_store_path(path, self.name)

    def open(self, path: str) -> IO[bytes]:
        """The file, opened for reading."""
        try:
            return self._path(path).open("rb")
        except OSError as e:
            raise BadInputError(f"{self.name}: cannot read {shown(path)}: {e.strerror or e}") from e

    def exists(self, path: str) -> bool:
        """Whether the file is there."""
        return self._path(path).is_file()

    def size(self, path: str) -> int:
        """Its size in bytes."""
        return self._path(path).stat().st_size


class TarStore:
    """An oci-archive or docker-archive: a tarball opened once, its members read in place."""

    def __init__(self, tar: tarfile.TarFile, name: str) -> None:
        self.tar, self.name = tar, name
        self.members: dict[str, tarfile.TarInfo] = {}
        for member in tar.getmembers():
            if member.isfile() or member.issym() or member.islnk():
                self.members[clean_store_path(member.name, name)] = member

    def _member(self, path: str) -> tarfile.TarInfo:
        member = self.members.get(clean_store_path(path, self.name))
        if member is None:
            raise BadInputError(f"{self.name}: no {shown(path)} in the archive")
        return member

    def open(self, path: str) -> IO[bytes]:
        """The member's bytes, read from the tarball as they are needed."""
        try:
            handle = self.tar.extractfile(self._member(path))
        except (KeyError, tarfile.TarError) as e:  # a link to a member that is not there
            raise BadInputError(f"{self.name}: cannot read {shown(path)}: {e}") from e
        if handle is None:
            raise BadInputError(f"{self.name}: {shown(path)} is not a regular file")
        return handle

    def exists(self, path: str) -> bool:
        """Whether the archive has the member."""
        return clean_store_path(path, self.name) in self.members

    def size(self, path: str) -> int:
        """The member's size (a link's target's: ``docker save`` links repeated layers)."""
        member = self._member(path)
        for _ in range(_LINK_HOPS):
            if not (member.issym() or member.islnk()):
                return member.size
            base = member.name.rpartition("/")[0] if member.issym() else ""
            linked = f"{base}/{member.linkname}" if base else member.linkname
            member = self._member(_normal(linked, self.name))
        raise BadInputError(f"{self.name}: {shown(path)}: links past {_LINK_HOPS} hops")


def _normal(path: str, name: str) -> str:
    """A link target inside the archive, ``..`` applied; BadInputError if it leaves it."""
    parts: list[str] = []
    for part in path.split("/"):
        if part == "..":
            if not parts:
                raise BadInputError(f"{name}: {shown(path)}: a link leaving the archive")
            parts.pop()
        elif part not in ("", "."):
            parts.append(part)
    return "/".join(parts)


def clean_store_path(path: str, name: str) -> str:
    """A path inside a layout or archive, without ``./``; BadInputError for ``..`` or ``/``."""
    parts = [p for p in path.split("/") if p not in ("", ".")]
    if path.startswith("/") or ".." in parts:
        raise BadInputError(f"{name}: {shown(path)}: a path outside the image")
    return "/".join(parts)


class _Hashing(io.RawIOBase):
    """Counts and hashes what is read through it."""

    def __init__(self, raw: IO[bytes]) -> None:
        super().__init__()
        self.raw = raw
        self.sha = hashlib.sha256()
        self.count = 0

    def readable(self) -> bool:
        """Always."""
        return True

    def readinto(self, buffer: Any) -> int:  # noqa: ANN401  (io's own signature)
        """Read, hash and count."""
        data = self.raw.read(len(buffer))
        n = len(data)
        buffer[:n] = data
        self.sha.update(data)
        self.count += n
        return n

    def digest(self) -> str:
        """``sha256:<hex>`` of everything read."""
        return f"sha256:{self.sha.hexdigest()}"

    def drain(self) -> None:
        """Read the rest, so the digest covers the whole blob."""
        while self.read(_CHUNK):
            pass


@dataclass(frozen=True, slots=True)
class Expected:
    """What a blob must hash to (and how long it must be, when the descriptor says)."""

    digest: str | None
    size: int | None
    label: str  # "layer 2 sha256:..." or "manifest sha256:..." in errors


def verify(stream: _Hashing, expected: Expected, store: str) -> None:
    """BadInputError naming the blob when what was read is not what the descriptor says."""
    if expected.size is not None and stream.count != expected.size:
        raise BadInputError(
            f"{store}: {expected.label}: {stream.count} bytes, the descriptor says {expected.size}"
        )
    if expected.digest is not None and stream.digest() != expected.digest:
        raise BadInputError(
            f"{store}: {expected.label}: content hashes to {stream.digest()}: "
            "the blob is corrupted or was changed"
        )


def read_json(store: Store, path: str, expected: Expected) -> dict[str, Any]:
    """A small JSON blob (manifest, index, config), verified, as a dict."""
    with store.open(path) as raw:
        hashing = _Hashing(raw)
        data = hashing.read(JSON_LIMIT + 1) or b""
        if len(data) > JSON_LIMIT:
            raise BadInputError(f"{store.name}: {expected.label}: larger than a JSON document")
        verify(hashing, expected, store.name)
    try:
        parsed = json.loads(data)
    except (UnicodeDecodeError, json.JSONDecodeError) as e:
        raise BadInputError(f"{store.name}: {expected.label}: not JSON ({e})") from e
    if not isinstance(parsed, dict):
        raise BadInputError(f"{store.name}: {expected.label}: not a JSON object")
    return parsed


class _Readable(Protocol):
    def read(self, size: int = -1, /) -> bytes: ...


class _Decompressed(io.RawIOBase):
    """A layer's tar bytes from its gzip, zstd or plain stream, with the ratio checked."""

    def __init__(self, raw: _Hashing, limits: Limits, label: str, store: str) -> None:
        super().__init__()
        self.raw, self.limits, self.label, self.store = raw, limits, label, store
        self.plain = hashlib.sha256()
        self.produced = 0
        head = raw.read(4) or b""
        self._pending = head
        self._inner: _Readable | None = None
        self._errors: tuple[type[BaseException], ...] = (OSError, EOFError, zlib.error)
        self.compression = "none"
        if head.startswith(GZIP_MAGIC):
            # GzipFile reads concatenated members and the zero padding some tools add.
            self.compression = "gzip"
            self._inner = gzip.GzipFile(fileobj=_Prefixed(head, raw), mode="rb")
        elif head.startswith(ZSTD_MAGIC):
            import zstandard  # noqa: PLC0415  (only when a layer is zstd-compressed)

            self.compression = "zstd"
            self._errors += (zstandard.ZstdError,)
            self._inner = zstandard.ZstdDecompressor().stream_reader(
                io.BufferedReader(_Prefixed(head, raw), _CHUNK), read_across_frames=True
            )

    def readable(self) -> bool:
        """Always."""
        return True

    def readinto(self, buffer: Any) -> int:  # noqa: ANN401  (io's own signature)
        """Decompressed bytes; BadInputError for corrupt data or a decompression bomb."""
        if self._inner is None:
            if self._pending:
                data, self._pending = self._pending[: len(buffer)], self._pending[len(buffer) :]
            else:
                data = self.raw.read(len(buffer)) or b""
        else:
            try:
                data = self._inner.read(len(buffer))
            except self._errors as e:
                raise BadInputError(
                    f"{self.store}: {self.label}: corrupted {self.compression} data ({e})"
                ) from e
        n = len(data)
        buffer[:n] = data
        self.plain.update(data)
        self.produced += n
        if self.limits.refuse_ratio(self.produced, self.raw.count):
            raise BadInputError(
                f"{self.store}: {self.label}: decompresses past {self.limits.ratio}x its size; "
                f"refusing ({hint('ratio')})"
            )
        return n

    def drain(self) -> None:
        """Read to the end, so both digests cover the whole layer."""
        while self.read(_CHUNK):
            pass
        self.raw.drain()

    def diff_id(self) -> str:
        """``sha256:<hex>`` of the uncompressed tar (what the config's diff_ids list)."""
        return f"sha256:{self.plain.hexdigest()}"


class _Prefixed(io.RawIOBase):
    """Bytes already read (a magic number), then the rest of the stream."""

    def __init__(self, head: bytes, rest: _Hashing) -> None:
        super().__init__()
        self.head, self.rest = head, rest

    def readable(self) -> bool:
        """Always."""
        return True

    def readinto(self, buffer: Any) -> int:  # noqa: ANN401  (io's own signature)
        """The head first, then the stream."""
        if self.head:
            n = min(len(buffer), len(self.head))
            buffer[:n] = self.head[:n]
            self.head = self.head[n:]
            return n
        data = self.rest.read(len(buffer)) or b""
        buffer[: len(data)] = data
        return len(data)


@contextmanager
def layer_tar(
    store: Store, path: str, expected: Expected, diff_id: str | None, limits: Limits
) -> Iterator[IO[bytes]]:
    """The uncompressed tar of a layer; both digests checked once the caller is done.

    The compressed stream must hash to the descriptor's digest and the tar to the
    config's diff_id (when given): a layer that decompresses to other files than the
    image recorded is refused, whatever its compressed bytes.
    """
    with store.open(path) as raw:
        hashing = _Hashing(raw)
        plain = _Decompressed(hashing, limits, expected.label, store.name)
        try:
            yield io.BufferedReader(plain, _CHUNK)
        except BadInputError as e:
            # A layer that is not what its descriptor says fails on that first: a
            # corrupted blob is reported as corrupted, not as the broken tar it reads as.
            _mismatch(
                plain=plain, hashing=hashing, expected=expected, diff_id=diff_id,
                store=store.name, cause=e,
            )  # fmt: skip
            raise
        plain.drain()
        verify(hashing, expected, store.name)
        _check_diff_id(plain, diff_id, expected, store.name)


def _check_diff_id(
    plain: _Decompressed, diff_id: str | None, expected: Expected, store: str
) -> None:
    if diff_id is not None and plain.diff_id() != diff_id:
        raise BadInputError(
            f"{store}: {expected.label}: uncompressed content hashes to "
            f"{plain.diff_id()}, the config's diff_id is {diff_id}"
        )


def _mismatch(
    *,
    plain: _Decompressed,
    hashing: _Hashing,
    expected: Expected,
    diff_id: str | None,
    store: str,
    cause: BadInputError,
) -> None:
    """The digest error, if the rest of the blob shows one; else nothing (``cause`` stands)."""
    try:
        plain.drain()
        decompressed = True
    except BadInputError:
        decompressed = False
        hashing.drain()  # the compressed digest can still be checked
    try:
        verify(hashing, expected, store)
        if decompressed:
            _check_diff_id(plain, diff_id, expected, store)
    except BadInputError as mismatch:
        raise mismatch from cause
