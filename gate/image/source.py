"""What an argument names as an image, and opening it as a store of blobs.

Named by a prefix, as skopeo names transports:

``oci:DIR[:REF]``                  an OCI image layout folder (REF: its ref.name annotation)
``oci-archive:TAR[:REF]``          the same, as a tarball (``podman save --format oci-archive``)
``docker-archive:TAR[:NAME:TAG]``  ``docker save`` / ``podman save --format docker-archive``
``podman:NAME`` / ``docker:NAME``  an image of the local runtime, saved to a temp tarball

or recognised by content without a prefix: a folder holding ``oci-layout``, a tarball
holding ``index.json`` or ``manifest.json`` at its top.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from gate.errors import BadInputError
from gate.reader.artifacts import shown

# What opens an image is imported when one is opened: every `inspect` asks parse()
# whether its arguments name images, and most name none.
if TYPE_CHECKING:
    from gate.image.blobs import Store

ARCHIVES = ("oci-archive", "docker-archive")
RUNTIMES = ("podman", "docker")
PREFIXES = ("oci", *ARCHIVES, *RUNTIMES)
_TAR_MAGIC_AT = 257
# docker-archive writes manifest.json after every layer's four members: look past
# a few hundred layers, never through a whole rootfs tarball (not an image).
_HEADERS_LOOKED_AT = 4096
_TOP_FILES = frozenset(("index.json", "manifest.json", "oci-layout"))


@dataclass(frozen=True, slots=True)
class Source:
    """An image argument: how it was written, what kind of source, where, and which image."""

    text: str
    kind: str  # one of PREFIXES
    path: Path | None  # None for a runtime's image
    ref: str | None  # the image inside a layout or archive, or the runtime's image name


def parse(text: str) -> Source | None:
    """The image an argument names, or None when it names no image (an ordinary path)."""
    prefix, sep, rest = text.partition(":")
    if sep and prefix in PREFIXES:
        if rest.startswith("//"):
            raise BadInputError(
                f"{shown(text)}: images are read from a runtime or a file, not a registry",
                hint="pull it first and name it as podman:NAME, or save it to a tarball",
            )
        if not rest:
            raise BadInputError(f"{shown(text)}: no path or image name after {prefix}:")
        if prefix in RUNTIMES:
            return Source(text, prefix, None, rest)
        path, ref = _split_ref(rest)
        return Source(text, prefix, path, ref)
    path = Path(text)
    if path.is_dir() and (path / "oci-layout").is_file():
        return Source(text, "oci", path, None)
    if path.is_file() and _image_tarball(path):
        return Source(text, "oci-archive", path, None)  # either archive: read by content
    return None


def _split_ref(rest: str) -> tuple[Path, str | None]:
    """``PATH`` or ``PATH:REF``: the longest prefix up to a colon that exists is the path."""
    if Path(rest).exists():
        return Path(rest), None
    cut = rest.find(":")
    while cut != -1:
        if Path(rest[:cut]).exists():
            return Path(rest[:cut]), rest[cut + 1 :] or None
        cut = rest.find(":", cut + 1)
    return Path(rest), None  # not there: opening it says so


def _image_tarball(path: Path) -> bool:
    """A tar file with an image's top-level files (looked for among its first headers)."""
    try:
        with path.open("rb") as handle:
            head = handle.read(512)
    except OSError:
        return False
    if head[_TAR_MAGIC_AT : _TAR_MAGIC_AT + 5] != b"ustar":
        return False
    import tarfile  # noqa: PLC0415  (only for a tar file: every inspect asks of its paths)

    try:
        with tarfile.open(path, "r:") as tar:
            for _, member in zip(range(_HEADERS_LOOKED_AT), tar, strict=False):
                if member.name.removeprefix("./") in _TOP_FILES:
                    return True
    except (OSError, tarfile.TarError):
        return False
    return False


@contextmanager
def opened(source: Source, workdir: Path) -> Iterator[tuple[Store, str | None]]:
    """The store of blobs and, for a runtime's image, the digest the runtime reports.

    A runtime's image is saved into ``workdir`` first (the caller's temp folder).
    """
    from gate.image import runtime  # noqa: PLC0415  (see the imports)
    from gate.image.blobs import FolderStore  # noqa: PLC0415

    if source.kind in RUNTIMES:
        saved = runtime.save(source.kind, source.ref or "", workdir)
        with _archive(saved.path, source.text) as store:
            yield store, saved.digest
        return
    if source.path is None or not source.path.exists():
        raise BadInputError(f"{shown(source.path or source.text)}: no such file or folder")
    if source.kind == "oci":
        if not (source.path / "index.json").is_file():
            raise BadInputError(f"{shown(source.path)}: no index.json: not an OCI image layout")
        yield FolderStore(source.path, shown(source.path)), None
        return
    with _archive(source.path, shown(source.path)) as store:
        yield store, None


@contextmanager
def _archive(path: Path, name: str) -> Iterator[Store]:
    import tarfile  # noqa: PLC0415  (see the imports)

    from gate.image.blobs import TarStore  # noqa: PLC0415

    try:
        tar = tarfile.open(path, "r:*")  # noqa: SIM115  (closed below)
    except FileNotFoundError as e:
        raise BadInputError(f"{name}: no such file") from e
    except (OSError, tarfile.TarError) as e:
        raise BadInputError(f"{name}: not a readable tarball ({e})") from e
    try:
        try:
            store = TarStore(tar, name)
        except (OSError, tarfile.TarError) as e:
            raise BadInputError(f"{name}: not a readable tarball ({e})") from e
        yield store
    finally:
        tar.close()
