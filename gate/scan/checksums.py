"""A ``SHA256SUMS`` file: the list of prebuilt files and their digests, read and checked.

The release workflow builds its artifacts once, writes their digests with
``sha256sum`` and hands the same bytes to every runner class (``cuda-gate run
--prebuilt SHA256SUMS``), to the attestation step and to the release: this module is
the one reader of that list. The format is GNU coreutils' (``sha256sum`` output):
one ``<64 hex digits><space><space or *><path>`` a line, paths relative to the
folder holding the list. Paths must stay inside that folder (no absolute path, no
``..``), and none may repeat; every problem is one BadInputError line naming the
file and the line.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

from gate.errors import BadInputError
from gate.fsutil import digest_file

# sha256sum's line: the digest, a space, then ' ' (text mode) or '*' (binary mode).
_LINE = re.compile(r"^([0-9a-fA-F]{64}) [ *](.+)$")


@dataclass(frozen=True)
class Listed:
    """One file of the list: its path as written, where it is, and its SHA-256."""

    name: str  # as written in the list (relative, forward slashes)
    path: Path  # the list's folder joined with it, resolved
    sha256: str

    @property
    def basename(self) -> str:
        """The file's own name: what a release asset of it is called."""
        return PurePosixPath(self.name).name


@dataclass(frozen=True)
class Verified:
    """A listed file whose bytes were read and match: its digest and size."""

    listed: Listed
    size: int


@dataclass(frozen=True)
class Checksums:
    """A parsed ``SHA256SUMS``: where it is, its own digest, and the files it lists."""

    source: Path
    sha256: str
    files: tuple[Listed, ...]

    def by_path(self) -> Mapping[Path, Listed]:
        """The listed files by their resolved path."""
        return {f.path: f for f in self.files}

    def verify(self) -> tuple[Verified, ...]:
        """Hash every listed file; BadInputError for the first one missing or different."""
        found: list[Verified] = []
        for listed in self.files:
            try:
                digest, size = digest_file(listed.path)
            except OSError as e:
                raise BadInputError(
                    f"{self.source}: {listed.name}: cannot read: {e.strerror or e}",
                    hint="unpack the build's files beside the list, where it names them",
                ) from e
            if digest != listed.sha256:
                raise BadInputError(
                    f"{self.source}: {listed.name}: sha256 is {digest}, the list says "
                    f"{listed.sha256}: these are not the bytes that were built",
                    hint="gate the files the build job wrote, unchanged",
                )
            found.append(Verified(listed, size))
        return tuple(found)


def read(path: Path) -> Checksums:
    """Parse ``path`` (see the module docstring); BadInputError naming the line that is wrong."""
    try:
        data = path.read_bytes()
    except OSError as e:
        raise BadInputError(f"{path}: cannot read the checksum list: {e.strerror or e}") from e
    digest = digest_file(path)[0]
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as e:
        raise BadInputError(f"{path}: not UTF-8 text (byte {e.start})") from e
    folder = path.resolve().parent
    files: list[Listed] = []
    seen: set[str] = set()
    for number, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        where = f"{path}:{number}"
        if line.startswith("\\"):
            # sha256sum escapes a name holding a newline or a backslash: refused, not guessed.
            raise BadInputError(f"{where}: an escaped file name (newline or backslash) is refused")
        match = _LINE.match(line)
        if match is None:
            raise BadInputError(
                f"{where}: not a sha256sum line (<64 hex digits>, two spaces, the path)"
            )
        name = match.group(2)
        _check_relative(name, where)
        if name in seen:
            raise BadInputError(f"{where}: {name} is listed twice")
        seen.add(name)
        files.append(Listed(name, (folder / name).resolve(), match.group(1).lower()))
    if not files:
        raise BadInputError(f"{path}: lists no file")
    return Checksums(path, digest, tuple(files))


def _check_relative(name: str, where: str) -> None:
    """A listed path stays inside the list's folder: relative, without ``..``."""
    pure = PurePosixPath(name)
    if pure.is_absolute() or ".." in pure.parts:
        raise BadInputError(f"{where}: {name} is not a path inside the list's folder")
