"""The project's gate configuration: ``cuda-gate.toml``, or ``[tool.cuda-gate]`` in pyproject.toml.

Where it comes from: ``--config PATH`` when given (a file named ``pyproject.toml`` is
read from its ``[tool.cuda-gate]`` table, any other file from its top level); else
``cuda-gate.toml`` in the project folder; else ``[tool.cuda-gate]`` of its
``pyproject.toml``; else the defaults, which run only the built-in smoke program.
Relative paths in the file (``cwd``, artifact globs, ``key_file``) are relative to
the folder holding the file. The shape (keys of a cuda-gate.toml; in pyproject.toml
every table sits under ``tool.cuda-gate``)::

    python = "/opt/venv/bin/python"  # the project's interpreter for {python} (optional)
    targets = ["sm_90"]        # required targets; the detected one is always required
    devices = ["12.1", "9.0"]  # capabilities to predict routes for in the report
    kernels = ["scale_f32"]    # kernels every artifact must carry (plain or mangled names)
    smoke = true               # also build and run the built-in smoke program
    strict_libraries = ["libmine*.so*"]  # loaded libraries judged per kernel, like artifacts
    host = "aarch64"           # the host the artifacts ship for (default: the device's only
                               # host class where it has one, 12.1 -> aarch64; else this one)
    stale_artifacts = "warn"   # an artifact the build did not write: "warn" or "fail"
    record_launches = true     # the CUPTI launch recorder in every run (the default; false
                               # turns it off, unless a require_launch needs it)
    image = "ghcr.io/org/app@sha256:..."  # run inside this delivery image (as --image does)

    [container]                # how the image runs (only with image / --image)
    runtime = "podman"         # or "docker", or a path; default: podman, else docker on PATH
    gpus = "auto"              # "auto" | "cdi" (--device nvidia.com/gpu=all) | "flag"
                               # (--gpus all) | "none"
    options = ["--network=none"]  # more `run` options, given to every container

    [[build]]                  # run in order before inspection
    name = "configure"         # optional: build-1, build-2, ...
    command = ["cmake", "-S", ".", "-B", "build", "-DCMAKE_CUDA_ARCHITECTURES={cmake_archs}"]
    cwd = "."                  # optional; a command may also be one string (split like a shell)
    env = { TORCH_CUDA_ARCH_LIST = "{torch_arch_list}" }
    timeout = 1800             # seconds; optional

    [[artifact]]               # final artifacts: globs (``**`` allowed) or wheels (*.whl)
    path = "build/libkernels.so"
    kernels = ["scale_f64"]    # optional: kernels this artifact must carry too
    require_launch = ["scale_f64"]  # optional: kernels the entry points must launch on
                               # both paths ("all": every kernel it carries)

    [[entry_point]]            # each runs natively and through forced PTX JIT
    name = "app-f32"           # optional: entry-1, ...; letters, digits, . _ -
    command = ["build/app", "f32"]
    cwd = "."; env = {}; timeout = 300
    expected_returncode = 0
    expected_output = "PASS"   # optional regular expression searched in stdout + stderr
    # command and env may use {python} and {nvcc} (nothing else is substituted)

    [signing]
    key_file = "keys/gate.pem" # optional Ed25519 private key for the manifest

    [store]                    # read by gate.store.settings (see there)

    [policy]                   # the release policy (gate.rules.policy; defaults shown)
    missing_sass = "fail"      # a required target without SASS: "fail" | "warn"
    ptx_as_device_code = false # PTX that JIT-compiles for a required target stands in for its SASS
    missing_ptx = "fail"       # a required target without PTX: "fail" | "warn" | "allow"
    ptx_for_highest = "off"    # compute_N for the highest required N: "off" | "warn" | "fail"
    surplus_targets = "allow"  # SASS no required target asked for: "allow" | "warn" | "fail"
    trap_stubs = "fail"        # kernels that only trap on a checked device: "fail" | "warn"
    launch_coverage = "off"    # kernels no entry point launched: "off" | "warn" | "fail"
    required_devices = { gb10 = ["12.1"] }  # per runner class (CUDA_GATE_RUNNER_CLASS):
                               # capabilities every artifact must have a route on

    [policy.baseline]          # what a loss against --baseline does: "fail" (default) or "warn"
    dropped_target = "fail"    # also dropped_artifact, dropped_kernel, lost_native_route,
                               # newer_driver (gate.rules.baseline); [baseline] is the same
                               # table (one of the two)

``gate/schemas/config.schema.json`` describes the same shape for editors (Taplo); this
module stays the authority. Build commands and their ``env`` values may use the target
placeholders of :mod:`gate.placeholders`; entry points are taken literally. Every problem is one
ConfigError line naming the file and the key, such as
``cuda-gate.toml: entry_point[1].timeout: expected a number, got 'soon'``.
"""

from __future__ import annotations

import fnmatch
import glob
import re
import stat
import tomllib
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from gate.config import placeholders
from gate.config import policy as policy_table
from gate.config import values as tv
from gate.config.placeholders import PLACEHOLDERS, TOOLS, substitute, substitute_argv
from gate.errors import ConfigError
from gate.jsonutil import depth
from gate.reader.artifacts import file_kind, shown
from gate.rules.baseline import Policy
from gate.rules.compat import Form
from gate.rules.policy import ReleasePolicy
from gate.rules.require import Requirement
from gate.rules.targets import (
    Capability,
    Target,
    parse_required_target,
    parse_target_or_capability,
)

__all__ = [
    "PLACEHOLDERS",
    "ArtifactSpec",
    "BuildCommand",
    "BuildStep",
    "Config",
    "ContainerSettings",
    "EntryPoint",
    "EntryPointSpec",
    "ResolvedArtifact",
    "find_config",
    "load",
    "parse",
    "parse_text",
    "resolve_artifact_specs",
    "substitute",
]

CONFIG_FILE = "cuda-gate.toml"
PYPROJECT = "pyproject.toml"
BUILD_TIMEOUT = 1800.0
ENTRY_TIMEOUT = 300.0
_NAME_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]*$")
_TOP_KEYS = frozenset(
    {"python", "targets", "devices", "kernels", "smoke", "build", "artifact", "entry_point"}
    | {"strict_libraries", "signing", "store", "host", "stale_artifacts", "baseline"}
    | {"record_launches", "policy", "image", "container"}
)
_CONTAINER_KEYS = frozenset({"runtime", "gpus", "options"})
GPU_MODES = ("auto", "cdi", "flag", "none")
_BUILD_KEYS = frozenset({"name", "command", "cwd", "env", "timeout"})
_ARTIFACT_KEYS = frozenset({"path", "kernels", "require_launch"})
_ENTRY_KEYS = _BUILD_KEYS | {"expected_returncode", "expected_output"}
_SIGNING_KEYS = frozenset({"key_file"})

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


def find_config(project_dir: Path, explicit: Path | None = None) -> Path | None:
    """The file to read: ``explicit``, else cuda-gate.toml, else a pyproject.toml with the table."""
    if explicit is not None:
        if not explicit.is_file():
            raise ConfigError(f"{explicit}: no such configuration file")
        return explicit
    own = project_dir / CONFIG_FILE
    if own.is_file():
        return own
    pyproject = project_dir / PYPROJECT
    if pyproject.is_file():
        tool = _toml(_read(pyproject), pyproject).get("tool")
        if isinstance(tool, dict) and "cuda-gate" in tool:
            return pyproject
    return None


def load(project_dir: Path | None = None, config_path: Path | None = None) -> Config:
    """Find, read and validate the configuration; the defaults when there is none."""
    base = Path() if project_dir is None else project_dir
    path = find_config(base, config_path)
    if path is None:
        return Config(project_dir=base.resolve())
    return parse_text(_read(path), path)


def parse_text(text: str, path: Path) -> Config:
    """Validate the text of the file ``path`` (pyproject.toml: its [tool.cuda-gate] table)."""
    doc = _toml(text, path)
    if path.name == PYPROJECT:
        tool = doc.get("tool", {})
        table = tool.get("cuda-gate") if isinstance(tool, dict) else None
        if table is None:
            raise ConfigError(f"{path}: no [tool.cuda-gate] table")
        if not isinstance(table, dict):
            raise ConfigError(f"{path}: tool.cuda-gate: expected a table")
        return parse(table, label=str(path), prefix="tool.cuda-gate.", source=path)
    return parse(doc, label=str(path), prefix="", source=path)


def _read(path: Path) -> str:
    try:
        return path.read_text(encoding="utf-8")
    except OSError as e:
        raise ConfigError(f"{path}: cannot read: {e.strerror or e}") from e
    except UnicodeDecodeError as e:
        raise ConfigError(f"{path}: not UTF-8 text: {e}") from e


# No configuration nests anywhere near this; pyproject.toml's other tools' tables neither.
MAX_DEPTH = 64
# A dotted key of MAX_DEPTH parts at a line's start (``a.b.c = 1``, ``[a.b.c]``): tomllib
# keeps every prefix of such a key, so 20,000 parts cost it seconds and gigabytes.
_DEEP_KEY = re.compile(
    r"""^[ \t]*\[{0,2}[ \t]*(?:(?:[A-Za-z0-9_-]++|"(?:[^"\\\n]|\\.)*+"|'[^'\n]*+')"""
    rf"[ \t]*\.[ \t]*){{{MAX_DEPTH},}}",
    re.MULTILINE,
)


def _toml(text: str, path: Path) -> dict[str, Any]:
    """The document; ConfigError for invalid TOML and for nesting past :data:`MAX_DEPTH`.

    tomllib recurses once per nested array or inline table (a thousand levels raise
    RecursionError) and is quadratic in a dotted key's length, so both are bounded.
    """
    deep = f"{path}: nested deeper than {MAX_DEPTH} levels (tables, arrays or dotted keys)"
    if _DEEP_KEY.search(text):
        raise ConfigError(deep)
    try:
        doc = tomllib.loads(text)
    except tomllib.TOMLDecodeError as e:
        raise ConfigError(f"{path}: not valid TOML: {e}") from e
    except (RecursionError, MemoryError) as e:
        raise ConfigError(deep) from e
    if depth(doc) > MAX_DEPTH:
        raise ConfigError(deep)
    return doc


def _name(table: Mapping[str, Any], at: tv.At, default: str, seen: set[str]) -> str:
    name = tv.text(table["name"], at.child("name")) if "name" in table else default
    if not _NAME_RE.match(name):
        raise at.child("name").fail(f"{tv.quote(name)}: use letters, digits, '.', '_' and '-' only")
    if name in seen:
        raise at.child("name").fail(f"{tv.quote(name)} is used twice")
    if name == SMOKE_NAME:
        raise at.child("name").fail(f"{name!r} is the built-in smoke program's name")
    seen.add(name)
    return name


def _build(table: dict[str, Any], at: tv.At, base: Path, seen: set[str]) -> BuildStep:
    tv.check_keys(table, _BUILD_KEYS, at)
    command = tv.command(table, at)
    for index, arg in enumerate(command):
        placeholders.check(arg, str(at.child("command").child(index)))
    env = tv.environment(table.get("env", {}), at.child("env"))
    for name, value in env:
        placeholders.check(value, str(at.child("env").child(name)))
    return BuildStep(
        key=str(at),
        name=_name(table, at, f"build-{len(seen) + 1}", seen),
        command=command,
        cwd=base / tv.text(table.get("cwd", "."), at.child("cwd")),
        env=env,
        timeout=tv.seconds(table.get("timeout", BUILD_TIMEOUT), at.child("timeout")),
    )


def _artifact(table: dict[str, Any], at: tv.At) -> ArtifactSpec:
    tv.check_keys(table, _ARTIFACT_KEYS, at)
    if "path" not in table:
        raise at.child("path").fail("missing: give a path or glob relative to the project")
    return ArtifactSpec(
        key=str(at),
        pattern=tv.text(table["path"], at.child("path")),
        kernels=tv.texts(table.get("kernels", []), at.child("kernels")),
        require_launch=_require_launch(table.get("require_launch", []), at.child("require_launch")),
    )


def _require_launch(value: object, at: tv.At) -> str | tuple[str, ...]:
    """``"all"`` or a list of kernel names (as ``kernels`` takes them)."""
    if isinstance(value, str):
        if value != "all":
            raise at.fail(f'expected "all" or a list of kernel names, got {tv.quote(value)}')
        return value
    names = tv.texts(value, at)
    for i, name in enumerate(names):
        if not name.strip():
            raise at.child(i).fail("a kernel name is empty")
    return names


def _entry(table: dict[str, Any], at: tv.At, base: Path, seen: set[str]) -> EntryPointSpec:
    tv.check_keys(table, _ENTRY_KEYS, at)
    command = tv.command(table, at)
    for index, arg in enumerate(command):
        placeholders.check(arg, str(at.child("command").child(index)), TOOLS)
    env = tv.environment(table.get("env", {}), at.child("env"))
    for name, value in env:
        placeholders.check(value, str(at.child("env").child(name)), TOOLS)
    expected = table.get("expected_output")
    if expected is not None:
        expected = tv.text(expected, at.child("expected_output"))
        try:
            re.compile(expected)
        except re.error as e:
            raise at.child("expected_output").fail(f"not a regular expression: {e}") from e
    return EntryPointSpec(
        key=str(at),
        name=_name(table, at, f"entry-{len(seen) + 1}", seen),
        command=command,
        cwd=base / tv.text(table.get("cwd", "."), at.child("cwd")),
        env=env,
        timeout=tv.seconds(table.get("timeout", ENTRY_TIMEOUT), at.child("timeout")),
        # A signal shows as a negative status (-11 for SIGSEGV), an exit as 0-255.
        expected_returncode=tv.integer(
            table.get("expected_returncode", 0), at.child("expected_returncode"), low=-64, high=255
        ),
        expected_output=expected,
    )


def _target(given: str, at: tv.At) -> Target:
    try:
        return parse_required_target(given)
    except ConfigError as e:
        raise at.fail(e.message) from e


def _capability(given: str, at: tv.At) -> Capability:
    try:
        return parse_target_or_capability(given)
    except ConfigError as e:
        raise at.fail(e.message) from e


def _scalars(value: object, at: tv.At) -> tuple[tuple[str, Scalar], ...]:
    out: list[tuple[str, Scalar]] = []
    for name, item in tv.table(value, at).items():
        if not isinstance(item, str | int | float | bool):
            raise at.child(name).fail(f"expected a string, number or boolean, got {tv.show(item)}")
        out.append((name, item))
    return tuple(out)


def parse(
    doc: Mapping[str, Any], *, label: str, prefix: str = "", source: Path | None = None
) -> Config:
    """Validate one configuration table (a cuda-gate.toml document, or tool.cuda-gate)."""
    base = (source.parent if source is not None else Path()).resolve()
    root = tv.At(label, prefix.rstrip("."))
    tv.check_keys(doc, _TOP_KEYS, root)

    def at(key: str) -> tv.At:
        return root.child(key)

    targets = tv.texts(doc.get("targets", []), at("targets"))
    devices = tv.texts(doc.get("devices", []), at("devices"))
    built: set[str] = set()
    entries: set[str] = set()
    signing = tv.table(doc.get("signing", {}), at("signing"))
    tv.check_keys(signing, _SIGNING_KEYS, at("signing"))
    key_file = signing.get("key_file")
    config = Config(
        project_dir=base,
        source=source,
        label=label,
        prefix=prefix,
        targets=tuple(_target(t, at("targets").child(i)) for i, t in enumerate(targets)),
        devices=tuple(_capability(d, at("devices").child(i)) for i, d in enumerate(devices)),
        kernels=tv.texts(doc.get("kernels", []), at("kernels")),
        smoke=tv.flag(doc.get("smoke", True), at("smoke")),
        record_launches=_record_launches(doc, at),
        builds=tuple(
            _build(t, at("build").child(i), base, built)
            for i, t in enumerate(tv.tables(doc.get("build", []), at("build")))
        ),
        artifacts=tuple(
            _artifact(t, at("artifact").child(i))
            for i, t in enumerate(tv.tables(doc.get("artifact", []), at("artifact")))
        ),
        entry_points=tuple(
            _entry(t, at("entry_point").child(i), base, entries)
            for i, t in enumerate(tv.tables(doc.get("entry_point", []), at("entry_point")))
        ),
        signing_key=(
            base / tv.text(key_file, at("signing").child("key_file"))
            if key_file is not None
            else None
        ),
        store=_scalars(doc.get("store", {}), at("store")),
        python=_python(doc.get("python"), at("python"), base),
        strict_libraries=tv.texts(doc.get("strict_libraries", []), at("strict_libraries")),
        host=_choice(doc.get("host"), at("host"), HOSTS),
        stale_fails=_choice(doc.get("stale_artifacts", "warn"), at("stale_artifacts"), _STALE)
        == "fail",
        policy=policy_table.read(doc, root),
        image=tv.text(doc["image"], at("image")) if "image" in doc else None,
        container=_container(doc.get("container", {}), at("container")),
    )
    if not config.smoke and not config.entry_points:
        raise at("smoke").fail("false, but no entry_point is configured: nothing would run")
    needs = config.recorder_needs()
    if config.record_launches is False and needs:
        raise at("record_launches").fail(f"false, but {needs[0][0]} needs the launch recorder")
    return config


def _container(value: object, at: tv.At) -> ContainerSettings:
    """``[container]``: every key optional."""
    table = tv.table(value, at)
    tv.check_keys(table, _CONTAINER_KEYS, at)
    runtime = tv.text(table["runtime"], at.child("runtime")) if "runtime" in table else None
    if runtime is not None and not runtime.strip():
        raise at.child("runtime").fail("empty: name podman, docker or a path")
    gpus = _choice(table.get("gpus", "auto"), at.child("gpus"), GPU_MODES) or "auto"
    options = tv.texts(table.get("options", []), at.child("options"))
    for i, option in enumerate(options):
        if not option.startswith("-"):
            raise (
                at.child("options")
                .child(i)
                .fail(f"{tv.quote(option)}: not an option (each is one `run` option: --volume=A:B)")
            )
    return ContainerSettings(runtime, gpus, options)


HOSTS = ("x86_64", "aarch64", "ppc64le")  # as `uname -m` names them
_STALE = ("warn", "fail")


def _record_launches(doc: Mapping[str, Any], at: Callable[[str], tv.At]) -> bool | None:
    """``record_launches``: absent (the default: on), or a flag."""
    if "record_launches" not in doc:
        return None
    return tv.flag(doc["record_launches"], at("record_launches"))


def _choice(value: object, at: tv.At, allowed: Sequence[str]) -> str | None:
    """One of ``allowed``, or None when the key is absent."""
    if value is None:
        return None
    text = tv.text(value, at)
    if text not in allowed:
        raise at.fail(f"{tv.quote(text)}: expected one of {', '.join(allowed)}")
    return text


def _python(value: object, at: tv.At, base: Path) -> str | None:
    """The configured interpreter: a command name, or a path relative to the file's folder."""
    if value is None:
        return None
    text = tv.text(value, at)
    return str(base / text) if "/" in text and not text.startswith("/") else text


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
