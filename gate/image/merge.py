"""An image's layers applied in order into one merged view, writing only the chosen files.

The OCI image spec's changeset rules (image-spec ``layer.md``): each layer's entries
replace what lower layers had at the same path (a directory over a directory keeps its
children; anything else replaces the whole subtree); ``.wh.NAME`` deletes NAME and
everything under it from the lower layers; ``.wh..wh..opq`` in a folder deletes
everything the lower layers had in it. Paths are taken literally, as overlay storage
applies them: a lower layer's symlink is never followed by a higher layer's entry.

Nothing is extracted but the files ``select`` accepts (by path and first bytes; by
default device-code candidates and ``*.dist-info`` metadata), written under a folder
of the caller's that mirrors the image's tree: no symlink, device node or FIFO is ever
created. Names that leave the image (absolute, ``..``) are refused, as are hard links
to what is not there. Each layer is read as a stream, once.
"""

from __future__ import annotations

import os
import shutil
import tarfile
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from enum import Enum
from pathlib import Path
from types import MappingProxyType
from typing import IO

from gate.errors import BadInputError
from gate.image.blobs import Expected, Store, layer_tar
from gate.image.layout import Image, Layer
from gate.reader.artifacts import classify, shown
from gate.reader.limits import MB, Limits, hint

WHITEOUT = ".wh."
OPAQUE = ".wh..wh..opq"
# Entries of one image kept in the view: past real images (a CUDA image: ~100,000).
MAX_ENTRIES = 4_000_000
_HEAD = 8
_CHUNK = 1 << 20

Select = Callable[[str, bytes], bool]


class Kind(Enum):
    """What an entry of the merged view is."""

    FILE = "file"
    DIR = "dir"
    SYMLINK = "symlink"
    HARDLINK = "hardlink"
    FIFO = "fifo"
    DEVICE = "device"


_SPECIAL = {
    tarfile.DIRTYPE: Kind.DIR,
    tarfile.CHRTYPE: Kind.DEVICE,
    tarfile.BLKTYPE: Kind.DEVICE,
    tarfile.FIFOTYPE: Kind.FIFO,
}


@dataclass(frozen=True, slots=True)
class Entry:
    """One path of the merged view and the layer it comes from."""

    path: str  # relative to the image's root, no leading "/"
    kind: Kind
    layer: int  # index into the manifest's layers, bottom first
    layer_digest: str
    size: int
    mode: int
    link: str | None = None  # a symlink's target as written; a hard link's path


@dataclass(frozen=True)
class Merged:
    """The merged view of an image and the files written for it."""

    image: Image
    entries: Mapping[str, Entry]
    written: tuple[str, ...]  # paths written under ``dest``, sorted
    dest: Path | None


def in_dist_info(path: str) -> bool:
    """Whether ``path`` is a file inside a ``*.dist-info`` folder."""
    return any(part.endswith(".dist-info") for part in path.split("/")[:-1])


def candidate(path: str, head: bytes) -> bool:
    """Files the inspector reads (ELF, archives, fatbins, zips) and distribution metadata."""
    return classify(head) is not None or in_dist_info(path)


def merge(
    store: Store,
    image: Image,
    *,
    dest: Path | None = None,
    select: Select = candidate,
    limits: Limits | None = None,
) -> Merged:
    """Apply every layer in order; with ``dest``, write the selected files under it."""
    view = _View(store.name, dest, select, limits or Limits.from_env())
    for layer in image.layers:
        expected = Expected(layer.stored, layer.size, layer.label())
        with layer_tar(store, layer.path, expected, layer.diff_id, view.limits) as stream:
            view.apply(layer, stream)
    return Merged(image, MappingProxyType(view.entries), tuple(sorted(view.written)), dest)


def clean_member(name: str, where: str) -> str:
    """A layer member's path relative to the root; BadInputError if it leaves the image."""
    parts = [p for p in name.split("/") if p not in ("", ".")]
    if name.startswith("/"):
        raise BadInputError(f"{where}: {shown(name)}: an absolute path in a layer; refusing")
    if ".." in parts:
        raise BadInputError(f"{where}: {shown(name)}: a path leaving the image; refusing")
    return "/".join(parts)


def _parent(path: str) -> str:
    return path.rpartition("/")[0]


class _View:
    """The merged tree while layers are applied: entries, children, files written."""

    def __init__(self, store: str, dest: Path | None, select: Select, limits: Limits) -> None:
        self.store, self.select, self.limits = store, select, limits
        self.write = dest is not None
        self.dest = dest or Path()
        self.entries: dict[str, Entry] = {}
        self.children: dict[str, set[str]] = {}
        self.written: set[str] = set()

    def apply(self, layer: Layer, stream: IO[bytes]) -> None:
        """One layer's tar, member by member (tarfile's member list emptied as it goes)."""
        where = f"{self.store}: {layer.label()}"
        try:
            # tarfile's own small record buffer: it copies the rest of its buffer on each
            # read, so a large one makes 50,000 headers take seconds longer.
            tar = tarfile.open(fileobj=stream, mode="r|")  # noqa: SIM115
            while (member := tar.next()) is not None:
                self._member(member, tar, layer, where)
                # Stream mode keeps every header read; an image can have millions.
                tar.members.clear()  # type: ignore[attr-defined]
        except tarfile.TarError as e:
            raise BadInputError(f"{where}: not a readable tar ({e})") from e

    def _member(
        self, member: tarfile.TarInfo, tar: tarfile.TarFile, layer: Layer, where: str
    ) -> None:
        path = clean_member(member.name, where)
        if not path:
            return  # the root folder itself
        parent, _, base = path.rpartition("/")
        if base == OPAQUE:
            for child in list(self.children.get(parent, ())):
                self._remove(child, below=layer.index)
            return
        if base.startswith(WHITEOUT):
            hidden = base.removeprefix(WHITEOUT)
            if hidden in ("", ".", ".."):
                raise BadInputError(f"{where}: {shown(path)}: a whiteout of nothing")
            self._remove(f"{parent}/{hidden}" if parent else hidden, below=layer.index)
            return
        kind, link, size = self._kind(member, path, where)
        entry = Entry(path, kind, layer.index, layer.digest, size, member.mode, link)
        self._place(entry, where)
        if kind is Kind.FILE:
            self._maybe_write(entry, member, tar, where)
        elif kind is Kind.HARDLINK and link in self.written:
            self._link(link, path)

    def _kind(self, member: tarfile.TarInfo, path: str, where: str) -> tuple[Kind, str | None, int]:
        """The entry's kind, link target and size; a hard link takes its file's."""
        if member.issym():
            return Kind.SYMLINK, member.linkname, 0
        if member.islnk():
            target = clean_member(member.linkname, where)
            found = self.entries.get(target)
            if found is None or found.kind is Kind.DIR:
                raise BadInputError(
                    f"{where}: {shown(path)}: a hard link to {shown(target)}, "
                    "which is no file of the image"
                )
            if found.kind is Kind.SYMLINK:
                return Kind.SYMLINK, found.link, 0
            return Kind.HARDLINK, target, found.size
        # Devices and FIFOs are kept in the view, never created.
        kind = _SPECIAL.get(member.type, Kind.FILE)
        return kind, None, member.size if kind is Kind.FILE else 0

    def _place(self, entry: Entry, where: str) -> None:
        """Put ``entry`` in the view over whatever was at its path and above it."""
        old = self.entries.get(entry.path)
        if old is not None and not (old.kind is Kind.DIR and entry.kind is Kind.DIR):
            if entry.kind is Kind.HARDLINK and entry.link == entry.path:
                return  # a file linked to itself: nothing changes
            self._remove(entry.path, below=None)
        parts = entry.path.split("/")
        for depth in range(1, len(parts)):
            ancestor = "/".join(parts[:depth])
            found = self.entries.get(ancestor)
            if found is not None and found.kind is not Kind.DIR:
                self._remove(ancestor, below=None)
                found = None
            if found is None:
                self._add(Entry(ancestor, Kind.DIR, entry.layer, entry.layer_digest, 0, 0o755))
        self._add(entry)
        if len(self.entries) > MAX_ENTRIES:
            raise BadInputError(f"{where}: more than {MAX_ENTRIES} files in one image; refusing")

    def _add(self, entry: Entry) -> None:
        self.entries[entry.path] = entry
        self.children.setdefault(_parent(entry.path), set()).add(entry.path)

    def _remove(self, path: str, *, below: int | None) -> None:
        """Remove ``path`` and what is under it; with ``below``, only what lower layers put
        there (a folder this layer still fills stays)."""
        order, stack = [], [path]
        while stack:
            current = stack.pop()
            if current in self.entries:
                order.append(current)
                stack.extend(self.children.get(current, ()))
        for current in reversed(order):  # children before their folders
            entry = self.entries[current]
            if below is not None and entry.layer >= below:
                continue
            if self.children.get(current):
                continue  # something of this layer is still in it
            del self.entries[current]
            self.children.pop(current, None)
            self.children.get(_parent(current), set()).discard(current)
            if current in self.written:
                self.written.discard(current)
                self._target(current).unlink(missing_ok=True)

    def _target(self, path: str) -> Path:
        return self.dest / path

    def _maybe_write(
        self, entry: Entry, member: tarfile.TarInfo, tar: tarfile.TarFile, where: str
    ) -> None:
        if not self.write:
            return
        source = tar.extractfile(member)
        if source is None:
            return
        head = source.read(_HEAD)
        if not self.select(entry.path, head):
            return
        if member.size > self.limits.member:
            raise BadInputError(
                f"{where}: {shown(entry.path)}: {member.size // MB} MB, past "
                f"{self.limits.member // MB} MB for one file; refusing ({hint('member')})"
            )
        target = self._target(entry.path)
        self._clear(target)
        try:
            target.parent.mkdir(parents=True, exist_ok=True)
            with target.open("wb") as out:
                out.write(head)
                shutil.copyfileobj(source, out, _CHUNK)
        except OSError as e:
            raise BadInputError(f"{target}: cannot write: {e.strerror or e}") from e
        self.written.add(entry.path)

    def _link(self, existing: str, path: str) -> None:
        """A hard link to a file already written: linked again (copied where links fail)."""
        target = self._target(path)
        self._clear(target)
        target.parent.mkdir(parents=True, exist_ok=True)
        try:
            os.link(self._target(existing), target)
        except OSError:
            shutil.copyfile(self._target(existing), target)
        self.written.add(path)

    @staticmethod
    def _clear(target: Path) -> None:
        """An empty folder this view made, where a file now goes, is removed first."""
        if target.is_dir() and not target.is_symlink():
            shutil.rmtree(target)
        else:
            target.unlink(missing_ok=True)
