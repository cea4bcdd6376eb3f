"""The artifact globs resolved to files, once the build has run."""

from __future__ import annotations

import difflib
import glob
import os
import stat
from collections import deque
from collections.abc import Iterable, Iterator
from pathlib import Path

from gate.config import values as tv
from gate.config.records import Config, ResolvedArtifact
from gate.errors import BadInputError, ConfigError
from gate.reader.artifacts import file_kind, shown


def resolve_artifact_specs(config: Config) -> tuple[ResolvedArtifact, ...]:
    """Every file the artifact globs match, once, in configuration order (run after the build).

    A glob that matches no file is a ConfigError naming the key, the glob and the nearest
    existing path (:func:`nearest`).
    """
    found: dict[Path, ResolvedArtifact] = {}
    for spec in config.artifacts:
        # glob.glob, not Path.glob: it also takes absolute patterns, relative to nothing.
        matches = sorted(glob.glob(spec.pattern, root_dir=config.project_dir, recursive=True))  # noqa: PTH207
        files = _regular_files(spec.key, [config.project_dir / m for m in matches])
        if not files:
            what = "matches only folders" if matches else "matches no file"
            pattern = tv.quote(spec.pattern)
            near = nearest(config.project_dir, spec.pattern) if not matches else None
            also = f"; nearest: {near}" if near else ""
            raise ConfigError(f"{spec.key}.path: {pattern} {what} in {config.project_dir}{also}")
        kernels = tuple(dict.fromkeys(config.kernels + spec.kernels))
        for path in files:
            resolved = path.resolve()
            if resolved in found:
                old = found[resolved]
                kernels_all = tuple(dict.fromkeys(old.kernels + kernels))
                found[resolved] = ResolvedArtifact(resolved, old.key, old.pattern, kernels_all)
            else:
                found[resolved] = ResolvedArtifact(resolved, spec.key, spec.pattern, kernels)
    return tuple(found.values())


def _regular_files(key: str, paths: Iterable[Path]) -> list[Path]:
    """The regular files among ``paths``; folders and broken links are passed over.

    A FIFO, socket or device is refused, never opened (opening a FIFO blocks until
    a writer comes): the glob named it as an artifact, and it cannot be one. That is a bad
    input file (exit 6, as ``inspect`` of the same path), not a bad configuration.
    """
    files = []
    for path in paths:
        try:
            mode = path.stat().st_mode
        except OSError:
            continue
        if stat.S_ISREG(mode):
            files.append(path)
        elif not stat.S_ISDIR(mode):
            raise BadInputError(
                f"{key}.path: {shown(path)}: not a regular file ({file_kind(mode)})"
            )
    return files


# How many folder entries the search for a nearest path reads at most: a glob under a
# project with a huge tree still fails at once.
NEAREST_ENTRIES = 20_000
_GLOB_CHARS = frozenset("*?[")


def nearest(root: Path, pattern: str) -> str | None:
    """The existing path a pattern that matches nothing most likely meant, as the user
    would write it, or None: the same file name elsewhere under ``root`` (built into
    another folder), else a close name in the deepest folder of the pattern that exists
    (``build/libmyk.so`` for ``build/libmyk.so.1``, ``build/`` where ``biuld/`` was
    written). Reads at most :data:`NEAREST_ENTRIES` entries, and only the folders an
    absolute pattern names outside the project."""
    parts = Path(pattern).parts
    absolute = Path(pattern).is_absolute()
    base = Path(parts[0]) if absolute else root
    start = 1 if absolute else 0
    name = parts[-1] if parts else ""
    # The same name elsewhere is looked for in the project only, never from "/".
    if name and not absolute and not _GLOB_CHARS & set(name):
        for path in _bounded_walk(base):
            if path.name == name and path.is_file():
                return _as_written(path, root)
    folder = base
    for part in parts[start:]:
        if _GLOB_CHARS & set(part) or not (folder / part).exists():
            close = _close_entry(folder, part)
            if close:
                return _as_written(folder / close, root)
            return _as_written(folder, root) if folder != base else None
        folder = folder / part
    return None


def _close_entry(folder: Path, part: str) -> str | None:
    """The entry of ``folder`` whose name is closest to ``part``, if any is close."""
    try:
        with os.scandir(folder) as entries:
            names = [e.name for _, e in zip(range(NEAREST_ENTRIES), entries, strict=False)]
    except OSError:
        return None
    close = difflib.get_close_matches(part, names, n=1, cutoff=0.6)
    return close[0] if close else None


def _bounded_walk(base: Path) -> Iterator[Path]:
    """Paths under ``base``, breadth first, hidden folders passed over, at most
    :data:`NEAREST_ENTRIES` entries read; links to folders are not followed."""
    todo, read = deque([base]), 0
    while todo and read < NEAREST_ENTRIES:
        folder = todo.popleft()
        try:
            with os.scandir(folder) as entries:
                for entry in entries:
                    read += 1
                    if read > NEAREST_ENTRIES:
                        return
                    if entry.is_dir(follow_symlinks=False):
                        if not entry.name.startswith("."):
                            todo.append(Path(entry.path))
                    else:
                        yield Path(entry.path)
        except OSError:
            continue


def _as_written(path: Path, root: Path) -> str:
    """``path`` relative to the project where it is inside it, a folder with a slash."""
    try:
        shown_path = str(path.relative_to(root)) if path != root else "."
    except ValueError:
        shown_path = str(path)
    return f"{shown_path}/" if path.is_dir() and shown_path != "." else shown_path
