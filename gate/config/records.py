"""The configuration as records: what the project asked for, validated.

Built by :func:`gate.config.parse` (each a ConfigError naming the key where a value is
wrong); the build steps and entry points keep their placeholders until the run fills
them in (:meth:`BuildStep.render`, :meth:`EntryPointSpec.entry_point`).
"""

from __future__ import annotations

import fnmatch
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from gate.config import values as tv
from gate.config.placeholders import substitute, substitute_argv
from gate.rules.baseline import Policy
from gate.rules.compat import Form
from gate.rules.policy import ReleasePolicy
from gate.rules.require import Requirement
from gate.rules.targets import Capability, Target

BUILD_TIMEOUT = 1800.0
ENTRY_TIMEOUT = 300.0

Scalar = str | int | float | bool
ENTRY_PASS = r"(?m)^PASS$"  # noqa: S105 - the smoke program prints PASS, not a password
# The built-in smoke program's entry point; a configured one may not take its name.
SMOKE_NAME = "smoke"


@dataclass(frozen=True)
class EntryPoint:
    """A program to run under both paths, and what a good run looks like."""

    name: str
    argv: tuple[str, ...]
    cwd: str | None = None
    env: tuple[tuple[str, str], ...] = ()
    timeout: float = ENTRY_TIMEOUT
    expected_returncode: int = 0
    expected_output: str = ENTRY_PASS


@dataclass(frozen=True)
class BuildCommand:
    """A build step with the targets filled in, ready for gate.proc.run."""

    name: str
    argv: tuple[str, ...]
    cwd: Path
    env: tuple[tuple[str, str], ...]
    timeout: float


@dataclass(frozen=True)
class BuildStep:
    """One configured build command, placeholders still in place."""

    key: str  # where it was configured, for messages: "cuda-gate.toml: build[0]"
    name: str
    command: tuple[str, ...]
    cwd: Path
    env: tuple[tuple[str, str], ...] = ()
    timeout: float = BUILD_TIMEOUT

    def render(
        self, targets: Sequence[Target], tools: Mapping[str, str] | None = None
    ) -> BuildCommand:
        """The command and environment for ``targets`` (the detected first) and ``tools``."""
        argv = substitute_argv(self.command, targets, where=f"{self.key}.command", tools=tools)
        env = tuple(
            (name, substitute(value, targets, where=f"{self.key}.env.{tv.clip(name)}", tools=tools))
            for name, value in self.env
        )
        return BuildCommand(self.name, argv, self.cwd, env, self.timeout)


@dataclass(frozen=True)
class ArtifactSpec:
    """A configured final artifact: a glob relative to the project folder."""

    key: str
    pattern: str
    kernels: tuple[str, ...] = ()
    # Kernels the entry points must launch on each path; "all": every kernel carried.
    require_launch: str | tuple[str, ...] = ()


@dataclass(frozen=True)
class ResolvedArtifact:
    """One file an artifact glob matched, with every kernel it must carry."""

    path: Path
    key: str
    pattern: str
    kernels: tuple[str, ...]

    @property
    def is_wheel(self) -> bool:
        """A wheel: its shared libraries are the artifacts (gate.reader.read_wheel)."""
        return self.path.suffix == ".whl"


@dataclass(frozen=True)
class EntryPointSpec:
    """A configured entry point: a real command of the project, run under both paths."""

    key: str
    name: str
    command: tuple[str, ...]
    cwd: Path
    env: tuple[tuple[str, str], ...] = ()
    timeout: float = ENTRY_TIMEOUT
    expected_returncode: int = 0
    expected_output: str | None = None

    def entry_point(self, tools: Mapping[str, str] | None = None) -> EntryPoint:
        """The entry point to run, with ``{python}`` and ``{nvcc}`` filled in from ``tools``."""
        where = f"{self.key}"
        env = {
            name: substitute(value, (), where=f"{where}.env.{tv.clip(name)}", tools=tools)
            for name, value in self.env
        }
        return EntryPoint(
            name=self.name,
            argv=substitute_argv(self.command, (), where=f"{where}.command", tools=tools),
            cwd=str(self.cwd),
            env=tuple(env.items()),
            timeout=self.timeout,
            expected_returncode=self.expected_returncode,
            expected_output=self.expected_output or "",
        )


@dataclass(frozen=True)
class ContainerSettings:
    """``[container]``: the runtime, how GPUs are passed, more ``run`` options."""

    runtime: str | None = None
    gpus: str = "auto"
    options: tuple[str, ...] = ()


@dataclass(frozen=True)
class Config:
    """A validated configuration; ``source`` is None when the defaults apply."""

    project_dir: Path
    source: Path | None = None
    label: str = "defaults"  # how messages name the file
    prefix: str = ""  # "tool.cuda-gate." in pyproject.toml
    targets: tuple[Target, ...] = ()
    devices: tuple[Capability, ...] = ()
    kernels: tuple[str, ...] = ()
    smoke: bool = True
    record_launches: bool | None = None  # the CUPTI launch recorder: None = the default (on)
    builds: tuple[BuildStep, ...] = ()
    artifacts: tuple[ArtifactSpec, ...] = ()
    entry_points: tuple[EntryPointSpec, ...] = ()
    signing_key: Path | None = None
    store: tuple[tuple[str, Scalar], ...] = ()
    python: str | None = None
    strict_libraries: tuple[str, ...] = ()
    host: str | None = None
    stale_fails: bool = False  # stale_artifacts = "fail"
    policy: ReleasePolicy = ReleasePolicy()  # noqa: RUF009 - frozen, shared safely; [policy]
    image: str | None = None  # the delivery image to run inside (--image overrides)
    container: ContainerSettings = ContainerSettings()

    @property
    def baseline(self) -> Policy:
        """Which losses against a baseline only warn (``[policy.baseline]`` or ``[baseline]``)."""
        return self.policy.baseline

    def recorder_needs(self) -> tuple[tuple[str, str], ...]:
        """What needs the launch recorder, each as (its key, what it asks for): an artifact's
        ``require_launch``, a judged ``[policy] launch_coverage``."""
        needs = [
            (
                f"{a.key.removeprefix(f'{self.label}: ')}.require_launch",
                f"launches of {a.pattern} (require_launch)",
            )
            for a in self.artifacts
            if a.require_launch
        ]
        if self.policy.launch_coverage.judged:
            key = f"{self.prefix}policy.launch_coverage"
            needs.append((key, "launch coverage (policy.launch_coverage)"))
        return tuple(needs)

    def is_strict(self, library: Path) -> bool:
        """Whether a loaded library is judged per kernel (a ``strict_libraries`` glob matches)."""
        return any(fnmatch.fnmatchcase(library.name, g) for g in self.strict_libraries)

    def required_targets(self, detected: Target | None) -> tuple[Target, ...]:
        """The detected target first, then the configured ones, each once, as SASS targets
        (what the build placeholders stand for)."""
        found = ((detected,) if detected is not None else ()) + self.targets
        return tuple(dict.fromkeys(t.as_sass() for t in found))

    def requirements(self, first: Requirement | None) -> tuple[Requirement, ...]:
        """What the artifacts must carry: ``first`` (the probed device's requirement, or the
        target named with ``--target``), then each configured target in its own form.

        A configured target of the probed device's SM number replaces the device's own
        requirement: whatever satisfies it satisfies the device's (gate.rules.require).
        """
        configured = tuple(Requirement.of_target(t) for t in self.targets)
        found = configured
        if first is not None and not (
            first.form is Form.DEVICE
            and any(r.target.number == first.target.number for r in configured)
        ):
            found = (first, *configured)
        return tuple(dict.fromkeys(found))
