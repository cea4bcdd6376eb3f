"""Reads result.json's parts back into records; every problem is one BadInputError line.

:meth:`gate.record.RunRecord.from_json` puts the whole record together from these; nobody
else parses result.json. Each reader takes the document's version where the part's shape
changed with it (see :mod:`gate.record` for the history).
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Any

from gate.container.info import ContainerInfo
from gate.errors import BadInputError, ConfigError
from gate.reader.hostelf import Dependency
from gate.reader.listing import DeviceEntry, Kind, Listing
from gate.record.parts import Artifact, Build, CrossCheck, Environment, Execution, LoadedLibrary
from gate.rules.causes import Cause, ExecPath, RuntimeFailure
from gate.rules.compat import Form
from gate.rules.require import Requirement
from gate.rules.targets import Target, Version
from gate.rules.verdict import Check, CheckState, Stage, StageStatus, Verdict
from gate.system.machine import DriverInfo, ToolkitInfo


class Reader:
    """Reads one result.json; every problem is one BadInputError line naming the file."""

    def __init__(self, where: str) -> None:
        self.where = where
        # Targets and versions repeat across thousands of listing entries: parse each once.
        self._parsed: dict[tuple[type, str], Any] = {}

    # The values: each a BadInputError naming the key when missing or of another type.

    def fail(self, what: str) -> BadInputError:
        """The error for ``what`` is wrong with the document."""
        return BadInputError(f"{self.where}: not a cuda-gate run record: {what}")

    def document(self, data: object, readable: tuple[int, ...]) -> tuple[Mapping[str, Any], int]:
        """The document and its version, one of ``readable``."""
        if not isinstance(data, Mapping):
            raise self.fail("not a JSON object")
        version = data.get("version")
        if version not in readable:
            raise BadInputError(
                f"{self.where}: run record version {version!r} is not one this cuda-gate "
                f"reads ({', '.join(map(str, readable))})"
            )
        return data, version

    def obj(self, data: Mapping[str, Any], key: str) -> Mapping[str, Any]:
        """An object."""
        value = data.get(key)
        if not isinstance(value, Mapping):
            raise self.fail(f"{key!r} is missing or not an object")
        return value

    def objs(self, data: Mapping[str, Any], key: str, *, default: bool = False) -> list[Any]:
        """A list of objects (with ``default``, an absent key is an empty list)."""
        if default and key not in data:
            return []
        value = data.get(key)
        if not isinstance(value, list) or not all(isinstance(v, Mapping) for v in value):
            raise self.fail(f"{key!r} is missing or not a list of objects")
        return value

    def text(self, data: Mapping[str, Any], key: str, *, optional: bool = False) -> Any:  # noqa: ANN401
        """A string (or, ``optional``, null)."""
        value = data.get(key)
        if value is None and optional:
            return None
        if not isinstance(value, str):
            raise self.fail(f"{key!r} is missing or not a string")
        return value

    def flag(self, data: Mapping[str, Any], key: str, default: bool | None = None) -> bool:
        """true or false (``default`` when absent)."""
        value = data.get(key, default)
        if not isinstance(value, bool):
            raise self.fail(f"{key!r} is missing or not true/false")
        return value

    def optional_flag(self, data: Mapping[str, Any], key: str) -> bool | None:
        """true, false or null."""
        value = data.get(key)
        if value is not None and not isinstance(value, bool):
            raise self.fail(f"{key!r} is not true, false or null")
        return value

    def number(self, data: Mapping[str, Any], key: str, default: float | None = None) -> float:
        """A number (``default`` when absent)."""
        value = data.get(key, default)
        if isinstance(value, bool) or not isinstance(value, int | float):
            raise self.fail(f"{key!r} is missing or not a number")
        return float(value)

    def integer(self, data: Mapping[str, Any], key: str, *, optional: bool = False) -> Any:  # noqa: ANN401
        """An integer (or, ``optional``, null)."""
        value = data.get(key)
        if value is None and optional:
            return None
        if isinstance(value, bool) or not isinstance(value, int):
            raise self.fail(f"{key!r} is missing or not an integer")
        return value

    def strings(self, data: Mapping[str, Any], key: str) -> list[str]:
        """A list of strings (empty when absent)."""
        value = data.get(key, [])
        if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
            raise self.fail(f"{key!r} is not a list of strings")
        return value

    def parsed(self, kind: Any, text: str | None) -> Any:  # noqa: ANN401
        """``kind.parse(text)`` (a Target, Capability or Version), None for None."""
        if text is None:
            return None
        known = self._parsed.get((kind, text))
        if known is not None:
            return known
        try:
            value = self._parsed[kind, text] = kind.parse(text)
        except ConfigError as e:
            raise self.fail(e.message) from e
        return value

    def when(self, text: str) -> datetime:
        """A time as result.json writes it."""
        try:
            return datetime.strptime(text, "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=UTC)
        except ValueError as e:
            raise self.fail(f"time {text!r} is not YYYY-MM-DDTHH:MM:SSZ") from e

    # The parts, in the order result.json holds them.

    def environment(self, env: Mapping[str, Any]) -> Environment:
        """``environment``."""
        driver = env.get("driver")
        toolkit = env.get("toolkit")
        container = env.get("container")
        return Environment(
            host_arch=self.text(env, "host_arch"),
            os=self.text(env, "os"),
            driver=None
            if not isinstance(driver, Mapping)
            else DriverInfo(
                self.text(driver, "name"),
                self.text(driver, "driver_version"),
                self.parsed(Version, self.text(driver, "cuda_version")),
            ),
            toolkit=None
            if not isinstance(toolkit, Mapping)
            else ToolkitInfo(
                self.parsed(Version, self.text(toolkit, "version")),
                self.text(toolkit, "release"),
                self.text(toolkit, "nvcc"),
            ),
            supported_targets=tuple(
                self.parsed(Target, t) for t in self.strings(env, "supported_targets")
            ),
            container=None
            if not isinstance(container, Mapping)
            else ContainerInfo.from_json(container, self.where),
        )

    def stage(self, s: Mapping[str, Any]) -> Stage:
        """One of ``stages``."""
        try:
            status = StageStatus(s.get("status"))
        except ValueError as e:
            raise self.fail(f"stage status {s.get('status')!r}") from e
        return Stage(
            self.text(s, "name"),
            status,
            self.text(s, "detail"),
            self.number(s, "duration", 0.0),
            self.integer(s, "exit_code", optional=True),
        )

    def build(self, b: Mapping[str, Any]) -> Build:
        """One of ``builds``."""
        argv = b.get("argv")
        if not isinstance(argv, list) or not all(isinstance(a, str) for a in argv):
            raise self.fail("a build's 'argv' is not a list of strings")
        return Build(
            self.text(b, "name"),
            self.text(b, "command"),
            tuple(argv),
            self.text(b, "cwd", optional=True),
            self.integer(b, "returncode"),
            self.number(b, "duration"),
            self.flag(b, "timed_out", default=False),
        )

    def listing(self, data: Mapping[str, Any]) -> Listing:
        """An artifact's or a loaded library's ``listing``."""
        entries = []
        for e in self.objs(data, "entries"):
            try:
                kind = Kind(e.get("kind"))
            except ValueError as err:
                raise self.fail(f"entry kind {e.get('kind')!r}") from err
            target_text = self.text(e, "target")
            if kind is Kind.LTOIR and target_text.startswith("lto_"):
                target_text = "sm_" + target_text.removeprefix("lto_")
            kernels = e.get("kernels", [])
            if not isinstance(kernels, list) or not all(isinstance(k, str) for k in kernels):
                raise self.fail("an entry's 'kernels' is not a list of strings")
            size = e.get("size", 0)  # absent before version 4: unknown
            if not isinstance(size, int) or isinstance(size, bool) or size < 0:
                raise self.fail("an entry's 'size' is not a number of bytes")
            entries.append(
                DeviceEntry(
                    kind,
                    self.parsed(Target, target_text),
                    tuple(kernels),
                    self.parsed(Version, self.text(e, "ptx_isa", optional=True)),
                    size=size,
                )
            )
        return Listing(tuple(entries))

    def artifact(self, a: Mapping[str, Any]) -> Artifact:
        """One of ``artifacts``."""
        cross = a.get("cross_check")
        listing = self.obj(a, "listing")
        return Artifact(
            name=self.text(a, "name"),
            path=self.text(a, "path"),
            sha256=self.text(a, "sha256"),
            size=self.integer(a, "size"),
            host_format=self.text(a, "host_format"),
            elf_machine=self.text(a, "elf_machine"),
            dependencies=tuple(
                Dependency(
                    self.text(d, "name"),
                    self.text(d, "needed_by", optional=True) or "",
                    self.text(d, "resolved", optional=True),
                )
                for d in self.objs(a, "dependencies")
            ),
            listing=self.listing(listing),
            inspector=self.text(listing, "inspector"),
            cross_check=None
            if not isinstance(cross, Mapping)
            else CrossCheck(self.text(cross, "tool"), tuple(self.strings(cross, "disagreements"))),
        )

    def loaded(self, x: Mapping[str, Any]) -> LoadedLibrary:
        """One of ``loaded_libraries``."""
        return LoadedLibrary(
            path=self.text(x, "path"),
            sha256=self.text(x, "sha256"),
            declared=self.flag(x, "declared"),
            entry_points=tuple(self.strings(x, "entry_points")),
            evidence=self.text(x, "evidence"),
            listing=self.listing(self.obj(x, "listing")),
            route=self.text(x, "route", optional=True),
            runs=self.optional_flag(x, "runs"),
            strict=self.flag(x, "strict", default=False),
        )

    def execution(self, e: Mapping[str, Any], version: int) -> Execution:
        """One of ``executions``; its stored ``passed`` must be what its fields say."""
        try:
            path = ExecPath(e.get("path"))
        except ValueError as err:
            raise self.fail(f"execution path {e.get('path')!r}") from err
        returncode = self.integer(e, "returncode", optional=True)
        timed_out = self.flag(e, "timed_out")
        output_ok = self.flag(e, "output_ok")
        stored = self.flag(e, "passed")
        if version == 1:
            # Version 1 stored only the outcome: recover the expectations it implies.
            expected = returncode if stored and returncode is not None else 0
            clean = stored or timed_out or returncode != expected or not output_ok
        else:
            expected = self.integer(e, "expected_returncode")
            clean = self.flag(e, "cache_clean")
        execution = Execution(
            entry_point=self.text(e, "entry_point"),
            path=path,
            command=self.text(e, "command"),
            returncode=returncode,
            timed_out=timed_out,
            duration=self.number(e, "duration"),
            log=self.text(e, "log"),
            log_sha256=self.text(e, "log_sha256", optional=True),
            output_ok=output_ok,
            expected_returncode=expected,
            cache_clean=clean,
            failure=RuntimeFailure.from_text(self.text(e, "failure", optional=True)),
        )
        if execution.passed != stored:
            raise self.fail(
                f"execution {execution.entry_point} [{path.value}] says passed={stored}, "
                f"its own fields say {execution.passed}"
            )
        return execution

    def requirements(self, data: Mapping[str, Any], version: int) -> tuple[Requirement, ...]:
        """``requirements`` (before version 3: ``required_targets``)."""
        if version < 3:  # the targets alone, each of its own form
            targets = self.strings(data, "required_targets")
            return tuple(Requirement.of_target(self.parsed(Target, t)) for t in targets)
        found = []
        for r in self.objs(data, "requirements"):
            try:
                form = Form(r.get("form"))
            except ValueError as e:
                raise self.fail(f"requirement form {r.get('form')!r}") from e
            found.append(Requirement(self.parsed(Target, self.text(r, "target")), form))
        return tuple(found)

    def check(self, c: Mapping[str, Any], version: int) -> Check:
        """One of ``checks`` (before version 3: two flags, ``passed`` and ``skipped``)."""
        cause_text = c.get("cause")
        try:
            cause = Cause(cause_text) if cause_text is not None else None
        except ValueError as e:
            raise self.fail(f"check cause {cause_text!r}") from e
        path_text = c.get("path")
        try:
            path = ExecPath(path_text) if path_text is not None else None
        except ValueError as e:
            raise self.fail(f"check path {path_text!r}") from e
        if version < 3:
            passed = self.flag(c, "passed")
            skipped = self.flag(c, "skipped", default=False)
            state = CheckState.NOT_RUN if skipped else CheckState.of(passed)
        else:
            try:
                state = CheckState(c.get("state"))
            except ValueError as e:
                raise self.fail(f"check state {c.get('state')!r}") from e
        return Check(
            name=self.text(c, "name"),
            classname=self.text(c, "classname"),
            state=state,
            message=self.text(c, "message"),
            duration=self.number(c, "duration", 0.0),
            cause=cause,
            path=path,
        )

    def same_verdict(self, stored: Mapping[str, Any], verdict: Verdict, version: int) -> None:
        """The stored ``verdict`` is the one the record's own fields decide (version 3 on)."""
        accepted = self.flag(stored, "accepted")
        self.text(stored, "statement")
        if version >= 3 and accepted != verdict.accepted:
            raise self.fail(
                f"the stored verdict (accepted={accepted}) disagrees with its own checks "
                f"(accepted={verdict.accepted})"
            )
