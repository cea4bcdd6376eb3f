"""Files of the delivery image, read from its own layers: the artifacts, and what runs loaded.

The image the run resolved is saved by its runtime (``podman image save --format
oci-archive --uncompressed``, ``docker image save``) under the work folder and read
with :mod:`gate.image`: every blob is checked against its digest as it is read, and
the manifest the layers come from must be the one whose digest the run records, so
the bytes inspected are the image's, not a file of this machine's that happens to
carry the same name. The layers are applied in order (whiteouts included) and only
the files asked for are written, under a folder that mirrors the image's tree.

Artifact globs name paths in the image: absolute ones from its root, relative ones
from its working folder (``WORKDIR``). A glob that matches a symbolic link reads the
file it points to (inside the image). The files are named in the evidence as
``IMAGE!/path/in/image``.
"""

from __future__ import annotations

import re
import shutil
import tarfile
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

from gate.config import Config, ResolvedArtifact
from gate.container.place import InImage
from gate.errors import BadInputError, ConfigError
from gate.image import runtime as saving
from gate.image.blobs import TarStore
from gate.image.layout import Image, read_image
from gate.image.merge import Entry, Kind, Merged, merge
from gate.reader.hostelf import Dependency, HostFormat
from gate.reader.limits import Limits

# Symbolic links followed inside the image before giving up (the kernel's limit).
_MAX_LINKS = 40
SEPARATOR = "!"
_LDD_TIMEOUT = 120.0


def shown_path(place: InImage, path: str) -> str:
    """How the evidence names a file of the image: ``REFERENCE!/path``."""
    return f"{place.image.reference.text}{SEPARATOR}/{path.lstrip('/')}"


def glob_regex(pattern: str) -> re.Pattern[str]:
    """A glob over image paths (no leading ``/``): ``*`` and ``?`` stay in one folder,
    ``**`` spans any number of them, ``[...]`` is a class."""
    out, i = [], 0
    while i < len(pattern):
        char = pattern[i]
        if pattern.startswith("**/", i):
            out.append("(?:[^/]+/)*")
            i += 3
            continue
        if pattern.startswith("**", i):
            out.append(".*")
            i += 2
            continue
        if char == "*":
            out.append("[^/]*")
        elif char == "?":
            out.append("[^/]")
        elif char == "[":
            end = pattern.find("]", i + 2)
            if end == -1:
                out.append(re.escape(char))
            else:
                body = pattern[i + 1 : end].replace("\\", "\\\\")
                out.append(f"[^{body[1:]}]" if body.startswith("!") else f"[{body}]")
                i = end
        else:
            out.append(re.escape(char))
        i += 1
    return re.compile("".join(out) + r"\Z")


@dataclass
class ImageFiles:
    """The saved image and the files written from it so far (image path -> file here)."""

    place: InImage
    image: Image
    store: TarStore
    tar: tarfile.TarFile
    root: Path
    limits: Limits
    entries: dict[str, Entry]
    written: dict[str, Path]

    @classmethod
    def open(cls, place: InImage, work: Path) -> ImageFiles:
        """Save the image into ``work`` and read its manifest; BadInputError when the
        saved manifest is not the one the runtime's digest names."""
        if work.exists():
            shutil.rmtree(work)
        work.mkdir(parents=True)
        runtime = place.runtime
        saved = saving.save(runtime.name, place.image.run_name, work, program=runtime.program)
        label = place.image.reference.text
        try:
            tar = tarfile.open(saved.path, "r:")  # noqa: SIM115  (closed by close())
        except (OSError, tarfile.TarError) as e:
            raise BadInputError(f"{label}: the saved image is not a readable tarball: {e}") from e
        try:
            store = TarStore(tar, label)
            image = read_image(store, label, "oci-archive", None, None)
        except BaseException:
            tar.close()
            raise
        expected = place.image.digest
        if runtime.name == "podman" and expected is not None and image.digest != expected:
            tar.close()
            raise BadInputError(
                f"{label}: the image {runtime.name} saved has manifest {image.digest}, "
                f"not {expected} as its inspection said; refusing to read it"
            )
        files = cls(place, image, store, tar, work / "root", Limits.from_env(), {}, {})
        files.extract(())  # the merged view, nothing written yet
        return files

    def close(self) -> None:
        """Close the archive; the files written stay until the work folder goes."""
        self.tar.close()

    def extract(self, paths: Iterable[str]) -> dict[str, Path]:
        """The files at ``paths`` of the image (no leading ``/``), written here once each."""
        asked = [p.lstrip("/") for p in paths]
        wanted = set(asked) - set(self.written)
        if wanted or not self.entries:
            merged = merge(
                self.store,
                self.image,
                dest=self.root,
                select=lambda path, _head: path in wanted,
                limits=self.limits,
            )
            self._keep(merged)
        return {p: self.written[p] for p in asked if p in self.written}

    def _keep(self, merged: Merged) -> None:
        self.entries = dict(merged.entries)
        for path in merged.written:
            self.written[path] = self.root / path

    def real_file(self, path: str) -> str | None:
        """The regular file ``path`` is in the image, every link on the way (a folder's,
        as ``/lib -> usr/lib``, or the file's own) followed inside the image."""
        pending = _normal(path).split("/")
        done: list[str] = []
        links = 0
        while pending:
            part = pending.pop(0)
            current = "/".join([*done, part])
            entry = self.entries.get(current)
            if entry is None:
                return None
            if entry.kind is Kind.SYMLINK and entry.link is not None:
                links += 1
                if links > _MAX_LINKS:
                    return None
                base = "" if entry.link.startswith("/") else "/".join(done)
                pending = _normal(f"{base}/{entry.link}").split("/") + pending
                done = []
                continue
            done.append(part)
            if not pending:
                return current if entry.kind in (Kind.FILE, Kind.HARDLINK) else None
        return None

    def in_image(self, pattern: str) -> str:
        """An artifact glob as a glob over image paths: relative ones from ``WORKDIR``."""
        if pattern.startswith("/"):
            return _normal(pattern)
        return _normal(f"{self.place.image.working_dir.rstrip('/')}/{pattern}")

    def artifacts(self, config: Config) -> tuple[tuple[ResolvedArtifact, str], ...]:
        """Every file the configured globs match in the image, written here, each with its
        name in the evidence; ConfigError naming the key for a glob that matches nothing."""
        chosen: dict[str, tuple[ResolvedArtifact, str]] = {}
        for spec in config.artifacts:
            pattern = self.in_image(spec.pattern)
            regex = glob_regex(pattern)
            matches = sorted(p for p in self.entries if regex.match(p))
            files = [f for f in (self.real_file(p) for p in matches) if f is not None]
            if not files:
                what = "matches only folders or links to nothing" if matches else "matches no file"
                raise ConfigError(
                    f"{spec.key}.path: {spec.pattern!r} ({'/' + pattern}) {what} in "
                    f"{self.place.image.reference.text}"
                )
            kernels = tuple(dict.fromkeys(config.kernels + spec.kernels))
            for path in files:
                old = chosen.get(path)
                merged_kernels = tuple(dict.fromkeys((old[0].kernels if old else ()) + kernels))
                resolved = ResolvedArtifact(
                    self.root / path, spec.key, spec.pattern, merged_kernels
                )
                chosen[path] = (resolved, shown_path(self.place, path))
        self.extract(chosen)
        missing = [p for p in chosen if p not in self.written]
        if missing:
            raise BadInputError(f"{shown_path(self.place, missing[0])}: could not be read")
        return tuple(chosen.values())

    def exists(self, path: str) -> bool:
        """Whether ``path`` is a file in a container of the image: in a mounted folder, or
        a file (through links) of the image's own."""
        if any(Path(path).is_relative_to(m) for m in self.place.mounts):
            return Path(path).is_file()
        return self.real_file(path) is not None

    def host_paths(self, paths: Sequence[Path]) -> tuple[Path | None, ...]:
        """Where the files a container loaded are here, in order: a mounted folder's files
        are this machine's; the rest are the image's, written here (None: not in it)."""
        mounted = self.place.mounts
        own = {p for p in paths if any(p.is_relative_to(m) for m in mounted)}
        theirs = {p: self.real_file(str(p)) for p in paths if p not in own}
        written = self.extract(f for f in theirs.values() if f is not None)
        found: list[Path | None] = []
        for path in paths:
            real = theirs.get(path)
            found.append(path if path in own else (written.get(real) if real else None))
        return tuple(found)


def _normal(path: str) -> str:
    """``/a/./b/../c`` as ``a/c``: an image path without a leading ``/``."""
    parts: list[str] = []
    for part in path.split("/"):
        if part in ("", "."):
            continue
        if part == "..":
            if parts:
                parts.pop()
            continue
        parts.append(part)
    return "/".join(parts)


_LDD_LINE = re.compile(r"^\s*(\S+)\s+=>\s+(not found|\S+)")


def image_dependencies(
    place: InImage, shown: dict[Path, str]
) -> Callable[[Path, HostFormat], tuple[Dependency, ...]]:
    """Dependencies as the image's own loader resolves them: ``ldd`` of the file where the
    container has it (an artifact at its path in the image, the gate's programs in the
    mounted work folder). Without ``ldd`` in the image, or for a file it cannot load,
    the direct dependencies are listed unresolved."""

    def resolve(path: Path, fmt: HostFormat) -> tuple[Dependency, ...]:
        label = shown.get(path)
        inside = label.split(SEPARATOR, 1)[1].split(SEPARATOR)[0] if label else str(path)
        if not fmt.needed:
            return ()
        said = place.run(["ldd", inside], timeout=_LDD_TIMEOUT)
        found = {
            m.group(1): m.group(2) for m in map(_LDD_LINE.match, said.stdout.splitlines()) if m
        }
        if not said.ok or not found:
            return tuple(Dependency(name, path.name, None) for name in fmt.needed)
        direct = [Dependency(n, path.name, _where(found.get(n))) for n in fmt.needed]
        rest = [
            Dependency(n, "(loaded by a dependency)", _where(w))
            for n, w in found.items()
            if n not in fmt.needed
        ]
        return (*direct, *rest)

    return resolve


def _where(text: str | None) -> str | None:
    return None if text in (None, "not found") else text
