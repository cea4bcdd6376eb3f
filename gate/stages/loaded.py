"""The shared libraries a process really loaded, ``dlopen`` included, from glibc's loader log.

An entry point's ELF dependencies say little about what it runs: Python extensions,
plugins and CUDA's own ``libcuda.so.1`` arrive through ``dlopen``. glibc's dynamic
loader reports every object it maps when the child runs with ``LD_DEBUG=libs``;
``LD_DEBUG_OUTPUT=<folder>/ld`` sends that report to ``<folder>/ld.<pid>``, one file
per process, so child processes are covered too and the program's own output stays
clean. Usage::

    folder = Path(tempfile.mkdtemp())
    result = proc.run(argv, env_set=loader_env(folder), cwd=cwd)
    libraries = parse_loaded(folder, cwd=cwd)

What the log holds (glibc 2.36, observed)::

         7417:	find library=libc.so.6 [0]; searching
         7417:	 search cache=/etc/ld.so.cache
         7417:	  trying file=/lib/x86_64-linux-gnu/libc.so.6
         7417:	calling init: /lib/x86_64-linux-gnu/libc.so.6
         7417:	calling init: ./liblink.so

``calling init: NAME`` names each object as the loader knows it (``l_name``): the
path found by a search, or the name given to ``dlopen`` when it held a slash, which
is then relative to the process's working folder. ``initialize program: NAME`` names
each process's own program as it was started (``./app``, ``/usr/bin/python3``,
``sh``): an entry point that is a wrapper script still shows the programs it ran,
which are recorded too (a name without a slash is looked up on PATH). A search that
found its file ends with that file as its last ``trying file=``; it counts too, so
that a library whose initialisation never ran (the process died first) is still
recorded.

Limits: glibc ignores ``LD_DEBUG`` and ``LD_DEBUG_OUTPUT`` for setuid and setgid
programs (secure-execution mode), and statically linked programs have no dynamic
loader; for those nothing is recorded. Other C libraries (musl) do not write this
log. A program that changes its working folder before a relative ``dlopen`` is
resolved against ``cwd``, which may then be wrong.
"""

from __future__ import annotations

import posixpath
import re
import shutil
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

# The loader appends ".<pid>" to this name.
LOG_NAME = "ld"
_LINE = re.compile(r"^\s*(\d+):\s?(.*)$")
_INIT = re.compile(r"^calling init: (.+)$")
_PROGRAM = re.compile(r"^initialize program: (.+)$")
_FIND = re.compile(r"^find library=(.+?) \[\d+\]; searching$")
_TRYING = re.compile(r"^\s*trying file=(.+)$")
# "search path=... (RPATH)", "search cache=...": the same search goes on.
_SEARCH = re.compile(r"^\s*search (path|cache)=")


@dataclass(frozen=True)
class LoadedLibrary:
    """One shared object a process mapped: its resolved path and the first process that did."""

    path: Path
    pid: int


def loader_env(folder: Path) -> dict[str, str]:
    """The variables that make glibc's loader log every loaded object into ``folder``."""
    return {"LD_DEBUG": "libs", "LD_DEBUG_OUTPUT": str(folder.resolve() / LOG_NAME)}


def parse_loaded(
    folder: Path, *, cwd: Path | None = None, exists: Callable[[str], bool] | None = None
) -> tuple[LoadedLibrary, ...]:
    """Every object the logged processes loaded, resolved and deduplicated.

    Processes in pid order, objects (each process's program too) in the order the
    loader reported them; relative names are resolved against ``cwd`` (default: the
    current folder). A program that cannot be found is left out.

    ``exists`` says whether a path is a file where the processes ran (a container of
    the image): the names are then kept as that file system names them, never resolved
    against this machine's.
    """
    base = (cwd or Path()).resolve() if exists is None else PurePosixPath(cwd or "/")
    found: dict[Path, LoadedLibrary] = {}
    for pid, log in _logs(folder):
        for name in _names(log, exists or _is_file):
            path = _resolve(name, Path(base)) if exists is None else _elsewhere(name, str(base))
            if path is not None and path not in found:
                found[path] = LoadedLibrary(path, pid)
    return tuple(found.values())


def _logs(folder: Path) -> list[tuple[int, str]]:
    logs: list[tuple[int, str]] = []
    for path in folder.glob(f"{LOG_NAME}.*"):
        suffix = path.name[len(LOG_NAME) + 1 :]
        if suffix.isdigit():
            logs.append((int(suffix), path.read_text(encoding="utf-8", errors="replace")))
    return sorted(logs)


def _is_file(name: str) -> bool:
    return Path(name).is_file()


def _elsewhere(name: str, base: str) -> Path | None:
    """A name as the processes' own file system has it: absolute, normalised, unresolved."""
    if "/" not in name:
        return None  # a program started by name: its path is not in the log
    return Path(posixpath.normpath(posixpath.join(base, name)))


def _names(log: str, exists: Callable[[str], bool]) -> list[str]:
    """Object names in load order: found search results and ``calling init`` lines."""
    names: list[str] = []
    last_try: str | None = None

    def close_search() -> None:
        nonlocal last_try
        if last_try is not None and exists(last_try):
            names.append(last_try)
        last_try = None

    for raw in log.splitlines():
        match = _LINE.match(raw)
        text = match.group(2) if match else raw
        if trying := _TRYING.match(text):
            last_try = trying.group(1).strip()
            continue
        if not text.strip() or _SEARCH.match(text):
            continue
        if _FIND.match(text):
            close_search()
            continue
        close_search()
        if init := _INIT.match(text) or _PROGRAM.match(text):
            names.append(init.group(1).strip())
    close_search()
    return names


def _resolve(name: str, base: Path) -> Path | None:
    if "/" not in name:  # a program started by name: found on PATH, or not at all
        found = shutil.which(name)
        return Path(found).resolve() if found else None
    path = Path(name)
    return (path if path.is_absolute() else base / path).resolve()
