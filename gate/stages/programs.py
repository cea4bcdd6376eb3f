"""Whether each entry point's program is there to run: a check that costs nothing.

An entry point whose program the build did not write (``command = ["build/ap"]`` with
``build/ap`` missing) fails here, before the execute stage, on a machine without a GPU
too, naming the nearest existing path; on a device it is not run on either path.
A program named without a slash is looked for on the entry point's PATH.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Mapping, Sequence
from pathlib import Path

from gate.config import EntryPoint
from gate.config.artifacts import nearest
from gate.rules.causes import Cause
from gate.rules.verdict import Check, CheckState


def missing_program(entry: EntryPoint, environ: Mapping[str, str]) -> str | None:
    """Why ``entry``'s program cannot run here, or None when it is there."""
    if not entry.argv or not entry.argv[0]:
        return "its command is empty"
    program = entry.argv[0]
    cwd = Path(entry.cwd) if entry.cwd else Path.cwd()
    if "/" not in program:
        search = dict(entry.env).get("PATH", environ.get("PATH", os.defpath))
        return None if shutil.which(program, path=search) else f"{program} is not on PATH"
    path = Path(program) if Path(program).is_absolute() else cwd / program
    if path.is_file():
        return None if os.access(path, os.X_OK) else f"{program} is not executable"
    if path.is_dir():
        return f"{program} is a folder, not a program"
    near = nearest(cwd, program)
    return f"{program} does not exist in {cwd}" + (f"; nearest: {near}" if near else "")


def program_checks(
    points: Sequence[EntryPoint], environ: Mapping[str, str]
) -> tuple[tuple[Check, ...], tuple[EntryPoint, ...]]:
    """A failed check for each entry point whose program is not there, and the entry
    points that can run."""
    checks: list[Check] = []
    runnable: list[EntryPoint] = []
    for entry in points:
        why = missing_program(entry, environ)
        if why is None:
            runnable.append(entry)
            continue
        checks.append(
            Check(
                f"{entry.name}: program",
                "gate.execute",
                CheckState.FAILED,
                f"{why}: not run on either path",
                cause=Cause.EXIT_STATUS,
                remedy=(
                    f"entry point {entry.name}: check that a build step writes "
                    f"{entry.argv[0] if entry.argv else 'its program'}, or fix its command"
                ),
            )
        )
    return tuple(checks), tuple(runnable)
