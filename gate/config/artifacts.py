"""The artifact globs resolved to files, once the build has run."""

from __future__ import annotations

import glob
import stat
from collections.abc import Iterable
from pathlib import Path

from gate.config import values as tv
from gate.config.records import Config, ResolvedArtifact
from gate.errors import ConfigError
from gate.reader.artifacts import file_kind, shown


def resolve_artifact_specs(config: Config) -> tuple[ResolvedArtifact, ...]:
    """Every file the artifact globs match, once, in configuration order (run after the build).

    A glob that matches no file is a ConfigError naming the key and the glob.
    """
    found: dict[Path, ResolvedArtifact] = {}
    for spec in config.artifacts:
        # glob.glob, not Path.glob: it also takes absolute patterns, relative to nothing.
        matches = sorted(glob.glob(spec.pattern, root_dir=config.project_dir, recursive=True))  # noqa: PTH207
        files = _regular_files(spec.key, [config.project_dir / m for m in matches])
        if not files:
            what = "matches only folders" if matches else "matches no file"
            pattern = tv.quote(spec.pattern)
            raise ConfigError(f"{spec.key}.path: {pattern} {what} in {config.project_dir}")
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
    a writer comes): the glob named it as an artifact, and it cannot be one.
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
            raise ConfigError(f"{key}.path: {shown(path)}: not a regular file ({file_kind(mode)})")
    return files
