"""Where each part of result.json differs from its record's fields, said once for both ways.

Every record not named here is written and read field by field (:mod:`gate.record.codec`):
:class:`gate.record.parts.RunInfo`, :class:`gate.record.parts.Device`,
:class:`gate.system.git.SourceInfo`, :class:`gate.system.machine.ToolkitInfo`,
:class:`gate.rules.verdict.Verdict`. The whole record's own shape is in
:mod:`gate.record.document`. Version-dependent reads follow :mod:`gate.record`'s history.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any

from gate.errors import ExitCode
from gate.reader.hostelf import Dependency
from gate.reader.listing import DeviceEntry, Kind, Listing
from gate.record.codec import Key, Reader, Shape, Writer, declare
from gate.record.parts import (
    READER,
    Artifact,
    Build,
    CrossCheck,
    Environment,
    Execution,
    LoadedLibrary,
)
from gate.rules.require import Requirement
from gate.rules.targets import Target
from gate.rules.verdict import Check, CheckState, Clause, Stage
from gate.system.machine import DriverInfo

# A listing: its entries, with the name of the inspector that found them.


def listing_json(listing: Listing, inspector: str, writer: Writer | None = None) -> dict[str, Any]:
    """A listing as result.json holds it."""
    out = writer or Writer()
    return {"inspector": inspector, "entries": [out.record(e) for e in listing.entries]}


def read_listing(read: Reader, data: Mapping[str, Any]) -> Listing:
    """An artifact's or a loaded library's ``listing``."""
    return Listing(read.records(DeviceEntry, read.objs(data, "entries")))


def _entry_target(read: Reader, e: Mapping[str, Any]) -> Target:
    text = read.text(e, "target")
    if text.startswith("lto_") and e.get("kind") == Kind.LTOIR.value:  # an older gate's name
        text = "sm_" + text.removeprefix("lto_")
    return read.parsed(Target, text)  # type: ignore[no-any-return]


def _entry_kernels(read: Reader, e: Mapping[str, Any]) -> tuple[str, ...]:
    return tuple(read.strings(e, "kernels", "an entry's 'kernels'"))


def _entry_size(read: Reader, e: Mapping[str, Any]) -> int:
    size = e.get("size", 0)  # absent before version 4: unknown
    if not isinstance(size, int) or isinstance(size, bool) or size < 0:
        raise read.fail("an entry's 'size' is not a number of bytes")
    return size


declare(
    DeviceEntry,
    Shape(
        keys=("kind", "target", "ptx_isa", "kernels", "size"),
        # The target's text is checked before the kernels and the size, parsed after them.
        reads=("kind", "target text", "kernels", "size", "target", "ptx_isa"),
        labels={"kind": "entry kind"},
        special={
            "target text": Key(read=lambda r, e: r.text(e, "target")),
            "target": Key(read=_entry_target),
            "kernels": Key(read=_entry_kernels),
            "size": Key(read=_entry_size),
        },
    ),
)


# What the run built and inspected.


def _argv(read: Reader, b: Mapping[str, Any]) -> tuple[str, ...]:
    argv = b.get("argv")
    if not isinstance(argv, list) or not all(isinstance(a, str) for a in argv):
        raise read.fail("a build's 'argv' is not a list of strings")
    return tuple(argv)


declare(
    Build,
    Shape(
        keys=("name", "command", "argv", "cwd", "returncode", "timed_out", "duration"),
        reads=("argv", "name", "command", "cwd", "returncode", "duration", "timed_out"),
        absent=frozenset({"timed_out"}),
        special={"argv": Key(read=_argv)},
    ),
)
declare(
    Dependency,
    Shape(
        special={"needed_by": Key(read=lambda r, d: r.text(d, "needed_by", optional=True) or "")}
    ),
)
declare(CrossCheck, Shape(keys=("tool", "agrees", "disagreements")))  # agrees: a property


_ARTIFACT = tuple(f.name for f in dataclasses.fields(Artifact))
declare(
    Artifact,
    Shape(
        keys=tuple(name for name in _ARTIFACT if name != "inspector"),  # written in "listing"
        reads=_ARTIFACT,
        loose=frozenset({"cross_check"}),
        before=lambda r, a: r.obj(a, "listing"),
        special={
            "listing": Key(
                write=lambda a, w: listing_json(a.listing, a.inspector, w),
                read=lambda r, a: read_listing(r, r.obj(a, "listing")),
            ),
            "inspector": Key(read=lambda r, a: r.text(r.obj(a, "listing"), "inspector")),
        },
    ),
)
declare(
    LoadedLibrary,
    Shape(
        absent=frozenset({"strict"}),
        special={
            "listing": Key(
                write=lambda x, w: listing_json(x.listing, READER, w) if w.listings else None,
                read=lambda r, x: read_listing(r, r.obj(x, "listing")),
            )
        },
    ),
)
declare(Environment, Shape(loose=frozenset({"driver", "toolkit", "container"})))
declare(DriverInfo, Shape(keys=("name", "driver_version", "cuda_version")))


# What the run did and found.


def _expected(read: Reader, e: Mapping[str, Any]) -> int:
    """``expected_returncode``; version 1 stored only the outcome, so the expectations it
    implies are recovered from it."""
    if read.version != 1:
        return read.integer(e, "expected_returncode")  # type: ignore[no-any-return]
    returncode = read.integer(e, "returncode", optional=True)
    return returncode if read.flag(e, "passed") and returncode is not None else 0


def _cache_clean(read: Reader, e: Mapping[str, Any]) -> bool:
    """``cache_clean`` (recovered from the outcome in version 1, as ``expected_returncode``)."""
    if read.version != 1:
        return read.flag(e, "cache_clean")
    return (
        read.flag(e, "passed")
        or read.flag(e, "timed_out")
        or read.integer(e, "returncode", optional=True) != _expected(read, e)
        or not read.flag(e, "output_ok")
    )


def _stored_passed(read: Reader, e: Mapping[str, Any]) -> bool:
    return read.flag(e, "passed")


def _same_passed(read: Reader, e: Mapping[str, Any], execution: Execution) -> None:
    """An execution's stored ``passed`` is what its own fields say."""
    stored = read.flag(e, "passed")
    if execution.passed != stored:
        raise read.fail(
            f"execution {execution.entry_point} [{execution.path.value}] says passed={stored}, "
            f"its own fields say {execution.passed}"
        )


declare(
    Execution,
    Shape(
        keys=(
            "entry_point",
            "path",
            "command",
            "returncode",
            "expected_returncode",
            "timed_out",
            "duration",
            "log",
            "log_sha256",
            "output_ok",
            "cache_clean",
            "passed",
            "failure",
        ),
        reads=(
            "path",
            "returncode",
            "timed_out",
            "output_ok",
            "passed",
            "expected_returncode",
            "cache_clean",
            "entry_point",
            "command",
            "duration",
            "log",
            "log_sha256",
            "failure",
        ),
        labels={"path": "execution path"},
        special={
            "expected_returncode": Key(read=_expected),
            "cache_clean": Key(read=_cache_clean),
            # A property, written as decided; read back, it must be what the fields decide.
            "passed": Key(read=_stored_passed),
        },
        check=_same_passed,
    ),
)


def _state(read: Reader, c: Mapping[str, Any]) -> CheckState:
    """A check's ``state`` (before version 3: two flags, ``passed`` and ``skipped``)."""
    if read.version >= 3:  # the version that gave each check one state
        return read.member(CheckState, c.get("state"), "check state")  # type: ignore[no-any-return]
    passed = read.flag(c, "passed")
    skipped = read.flag(c, "skipped", default=False)
    return CheckState.NOT_RUN if skipped else CheckState.of(passed)


declare(
    Check,
    Shape(
        keys=("name", "classname", "state", "message", "duration", "cause", "path", "error"),
        reads=("cause", "path", "state", "name", "classname", "message", "duration", "error"),
        absent=frozenset({"duration", "error"}),  # error: version 8 on
        labels={"cause": "check cause", "path": "check path"},
        special={"state": Key(read=_state)},
    ),
)


# A clause of the headline or a diagnosis (version 8): its record, and what it says of it.
declare(Clause, Shape(labels={"path": "clause path", "state": "clause state"}))


def _exit_code(read: Reader, s: Mapping[str, Any]) -> int | None:
    """A stage's ``exit_code``: null, or one of the gate's exit statuses (the verdict is
    decided from it)."""
    code = read.integer(s, "exit_code", optional=True)
    if code is not None:
        read.member(ExitCode, code, "stage exit_code")
    return code  # type: ignore[no-any-return]


declare(
    Stage,
    Shape(
        reads=("status", "name", "detail", "duration", "exit_code"),
        absent=frozenset({"duration"}),
        labels={"status": "stage status"},
        special={"exit_code": Key(read=_exit_code)},
    ),
)
declare(Requirement, Shape(reads=("form", "target"), labels={"form": "requirement form"}))
