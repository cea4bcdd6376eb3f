"""The gate runs only the code it started with, whatever a build writes.

A build runs as the gate's user and may write wherever that user may: into the virtual
environment the gate is installed in, too. Code a build appends to a module the gate
imports later would run inside the gate, where its secrets are. So ``cuda-gate run``:

1. before anything runs, checks its package's files against its distribution's
   ``RECORD`` (the SHA-256 pip wrote for each; a source checkout has none), and notes
   every file's digest: a change an earlier run's build made is refused here;
2. imports every module of the gate package while the first stages wait on their
   commands, so none of its own code is read from disk once project code may run;
3. right before the first command of the project (:meth:`Guard.arm`), puts an import
   hook first in ``sys.meta_path``: a module imported from then on (a lazy import of the
   standard library or a dependency) is loaded only from a file that is as its
   distribution's ``RECORD`` says, or, for a file no ``RECORD`` covers (the standard
   library), whose inode changed before that moment (``st_ctime``, which no unprivileged
   process can set back); a source module is compiled from the very bytes checked, never
   from a cached ``.pyc`` (a build could write one);
4. before the key signs or a credential reaches the store (:meth:`Guard.check`), hashes
   its package's files again: any file changed, or any import refused in step 3, is
   :class:`GateChangedError` (exit 3) naming the file, and nothing is signed or stored.

What stays out of reach is said in docs/secrets.md: code that ran before step 1 (a build
of an *earlier* run that changed a module imported at start-up runs first, at the next
start); a root process; an interpreter or standard library the build can write, changed
to run code without an import (a ``.pth`` file acts only at the next start).
"""

from __future__ import annotations

import base64
import hashlib
import importlib
import importlib.abc
import importlib.machinery
import importlib.util
import os
import pkgutil
import sys
import threading
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from types import CodeType, ModuleType

from gate.errors import ToolError

DISTRIBUTION = "cuda-gate"
_RECORD_PREFIX = "cuda_gate-"  # its .dist-info folder, as pip names it
_PACKAGE = "gate"
# Files of the package that are code or rules (bytecode caches are never trusted, only compiled).
_SKIPPED_FOLDERS = frozenset({"__pycache__"})


class GateChangedError(ToolError):
    """A file of the gate (or one it would import) changed while the run was going on."""


def _sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def _package_root() -> Path:
    module = sys.modules[_PACKAGE]
    return Path(_normal(next(iter(module.__path__))))


def _normal(path: Path | str) -> str:
    """An absolute path without ``..``, links left as they are (as RECORD names files)."""
    return os.path.normpath(os.path.abspath(path))  # noqa: PTH100 - no link resolved


def package_digests(root: Path) -> dict[str, str]:
    """Every file of the package below ``root`` (bytecode caches aside), by relative name."""
    found: dict[str, str] = {}
    for top, folders, files in os.walk(root):  # Path.walk: Python 3.12
        folders[:] = sorted(f for f in folders if f not in _SKIPPED_FOLDERS)
        for name in files:
            if not name.endswith(".pyc"):
                path = Path(top, name)
                found[path.relative_to(root).as_posix()] = _sha256(path.read_bytes())
    return found


def record_digests(site: Path, record: str) -> dict[str, str]:
    """A RECORD's SHA-256 per absolute path (rows without a hash, the .pyc files, left out)."""
    found: dict[str, str] = {}
    for line in record.splitlines():
        name = line.rpartition(",")[0]  # less the size
        name, _, digest = name.rpartition(",")
        algorithm, _, value = digest.partition("=")
        if algorithm != "sha256" or not value:
            continue
        if name.startswith('"') and name.endswith('"'):
            name = name[1:-1].replace('""', '"')
        raw = base64.urlsafe_b64decode(value + "=" * (-len(value) % 4))
        found[_normal(site / name)] = raw.hex()
    return found


def installed_records(paths: Sequence[str], prefix: str = "") -> dict[str, str]:
    """Every file a ``RECORD`` on ``paths`` (``sys.path``) hashes: absolute path -> SHA-256;
    with ``prefix``, only the distributions whose ``.dist-info`` folder starts with it."""
    found: dict[str, str] = {}
    for entry in paths:
        site = Path(entry or ".")
        try:
            infos = [
                p
                for p in site.iterdir()
                if p.name.endswith(".dist-info") and p.name.startswith(prefix)
            ]
        except OSError:
            continue
        for info in infos:
            try:
                text = (info / "RECORD").read_text(encoding="utf-8")
            except (OSError, UnicodeDecodeError):
                continue
            for path, digest in record_digests(site, text).items():
                found.setdefault(path, digest)
    return found


def record_problem(
    root: Path, digests: Mapping[str, str], records: Mapping[str, str]
) -> str | None:
    """Why the package's files are not the installed distribution's, or None.

    None also where no ``RECORD`` covers the package (a source checkout, an editable
    install): there is nothing to compare with.
    """
    recorded = {
        Path(path).relative_to(root).as_posix(): digest
        for path, digest in records.items()
        if Path(path).is_relative_to(root)
    }
    if not recorded:
        return None
    for name in sorted(recorded):
        if name not in digests:
            return f"{root / name}: recorded in {DISTRIBUTION}'s RECORD but missing"
        if digests[name] != recorded[name]:
            return f"{root / name}: not the file {DISTRIBUTION} installed (RECORD's sha256 differs)"
    return None


def preload(names: Iterator[str] | None = None) -> None:
    """Import every module of the gate package (``gate.__main__`` aside: it runs the CLI)."""
    package = sys.modules[_PACKAGE]
    found = names or (info.name for info in pkgutil.walk_packages(package.__path__, f"{_PACKAGE}."))
    for name in found:
        if name != f"{_PACKAGE}.__main__":
            try:
                importlib.import_module(name)
            except Exception:  # noqa: BLE001, S112 - the stage that needs it says why
                continue


def _now_ns() -> int:
    """The kernel's idea of now, as it stamps a changed inode (a new pipe's change time)."""
    read_end, write_end = os.pipe()
    try:
        return os.fstat(read_end).st_ctime_ns
    finally:
        os.close(read_end)
        os.close(write_end)


class _VerifiedSource(importlib.machinery.SourceFileLoader):
    """A source module compiled from bytes already checked (never from a .pyc)."""

    def __init__(self, fullname: str, path: str, source: bytes) -> None:
        super().__init__(fullname, path)
        self._source = source

    def get_code(self, fullname: str) -> CodeType:
        """The module's code, compiled from the checked source."""
        del fullname
        return compile(self._source, self.path, "exec", dont_inherit=True)


@dataclass
class _Hook(importlib.abc.MetaPathFinder):
    """Step 3: every import after :meth:`Guard.arm` goes through :meth:`find_spec`."""

    since_ns: int
    records: Mapping[str, str]
    refused: list[str] = field(default_factory=list)
    _busy: threading.local = field(default_factory=threading.local)

    def find_spec(
        self,
        fullname: str,
        path: Sequence[str] | None,
        target: ModuleType | None = None,
    ) -> importlib.machinery.ModuleSpec | None:
        """The path finder's spec for ``fullname``, with a loader of checked bytes only."""
        if getattr(self._busy, "on", False):
            return None
        self._busy.on = True
        try:
            spec = importlib.machinery.PathFinder.find_spec(fullname, path, target)
            if spec is None or not spec.has_location or spec.origin is None:
                return spec
            return self._checked(fullname, spec)
        finally:
            self._busy.on = False

    def _checked(
        self, fullname: str, spec: importlib.machinery.ModuleSpec
    ) -> importlib.machinery.ModuleSpec:
        archive = getattr(spec.loader, "archive", None)
        if not isinstance(spec.loader, _FILE_LOADERS):
            # A zip on sys.path (zipimport): the archive must predate project code.
            self._check_archive(fullname, archive)
            return spec
        origin = _normal(str(spec.origin))
        try:
            with Path(origin).open("rb") as handle:
                data = handle.read()
                changed_ns = os.fstat(handle.fileno()).st_ctime_ns
        except OSError as e:
            raise self._refuse(f"{origin}: cannot read a module to import: {e.strerror}") from e
        recorded = self.records.get(origin)
        if recorded is not None and _sha256(data) != recorded:
            raise self._refuse(
                f"{origin}: changed since it was installed (its RECORD's sha256 differs); "
                f"refusing to import {fullname} after project code ran"
            )
        if recorded is None and changed_ns >= self.since_ns:
            raise self._refuse(
                f"{origin}: changed after project code started; refusing to import {fullname}"
            )
        if not isinstance(spec.loader, importlib.machinery.SourceFileLoader):
            return spec  # an extension module or a sourceless one: checked, loaded as is
        loader = _VerifiedSource(fullname, origin, data)
        search = spec.submodule_search_locations
        checked = importlib.util.spec_from_file_location(
            fullname, origin, loader=loader, submodule_search_locations=search
        )
        return checked if checked is not None else spec

    def _check_archive(self, fullname: str, archive: object) -> None:
        where = str(archive)
        try:
            changed_ns = Path(where).stat().st_ctime_ns
        except (OSError, ValueError) as e:
            raise self._refuse(f"{where}: cannot check the archive of {fullname}: {e}") from e
        if changed_ns >= self.since_ns:
            raise self._refuse(
                f"{where}: changed after project code started; refusing to import {fullname}"
            )

    def _refuse(self, message: str) -> GateChangedError:
        self.refused.append(message)
        return GateChangedError(message, hint=_HINT)


# The loaders of a module that is a file of its own (a zip's are not).
_FILE_LOADERS = (
    importlib.machinery.SourceFileLoader,
    importlib.machinery.SourcelessFileLoader,
    importlib.machinery.ExtensionFileLoader,
)
_HINT = "install cuda-gate where the project's builds cannot write, and run it again"


class Guard:
    """Steps 1-4 of the module docstring for one run."""

    def __init__(self, root: Path, digests: Mapping[str, str]) -> None:
        self.root, self.digests = root, dict(digests)
        self._hook: _Hook | None = None
        self._preloading: threading.Thread | None = None

    @classmethod
    def begin(cls, *, records: Mapping[str, str] | None = None) -> Guard:
        """Steps 1 and 2: the package as installed (GateChangedError if not), preloading."""
        root = _package_root()
        digests = package_digests(root)
        # Only the gate's own RECORD here; every distribution's once the hook is armed.
        found = installed_records(sys.path, _RECORD_PREFIX) if records is None else records
        problem = record_problem(root, digests, found)
        if problem is not None:
            raise GateChangedError(problem, hint=_HINT)
        guard = cls(root, digests)
        guard._preloading = threading.Thread(target=preload, name="cuda-gate-preload", daemon=True)
        guard._preloading.start()
        return guard

    def arm(self) -> None:
        """Step 3, before the project's first command: every later import is checked."""
        if self._hook is not None:
            return
        if self._preloading is not None:
            self._preloading.join()
        self._hook = _Hook(_now_ns(), installed_records(sys.path))
        sys.meta_path.insert(0, self._hook)

    def check(self) -> None:
        """Step 4: GateChangedError naming the first file changed or import refused."""
        if self._hook is not None and self._hook.refused:
            raise GateChangedError(self._hook.refused[0], hint=_HINT)
        now = package_digests(self.root)
        for name in sorted(set(self.digests) | set(now)):
            if self.digests.get(name) != now.get(name):
                what = "added" if name not in self.digests else "changed or removed"
                raise GateChangedError(
                    f"{self.root / name}: {what} while the run's project commands ran; "
                    "refusing to sign or store with the gate's secrets",
                    hint=_HINT,
                )

    def close(self) -> None:
        """Take the import hook out (tests; a run ends with its process)."""
        if self._hook is not None and self._hook in sys.meta_path:
            sys.meta_path.remove(self._hook)
        self._hook = None
