"""The configuration's tables validated into records (:func:`parse`).

Every problem is one ConfigError line naming the file and the key, such as
``cuda-gate.toml: entry_point[1].timeout: expected a number, got 'soon'``.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from gate.config import placeholders
from gate.config import policy as policy_table
from gate.config import values as tv
from gate.config.placeholders import TOOLS
from gate.config.records import (
    BUILD_TIMEOUT,
    ENTRY_TIMEOUT,
    SMOKE_NAME,
    ArtifactSpec,
    BuildStep,
    Config,
    ContainerSettings,
    EntryPointSpec,
    Scalar,
)
from gate.errors import ConfigError
from gate.rules.targets import (
    Capability,
    Target,
    parse_required_target,
    parse_target_or_capability,
)

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


def _name(table: Mapping[str, Any], at: tv.At, default: str, seen: set[str]) -> str:
    name = tv.text(table["name"], at.child("name"), tv.MAX_NAME) if "name" in table else default
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
        cwd=base / tv.text(table.get("cwd", "."), at.child("cwd"), tv.MAX_PATH),
        env=env,
        timeout=tv.seconds(table.get("timeout", BUILD_TIMEOUT), at.child("timeout")),
    )


def _artifact(table: dict[str, Any], at: tv.At) -> ArtifactSpec:
    tv.check_keys(table, _ARTIFACT_KEYS, at)
    if "path" not in table:
        raise at.child("path").fail("missing: give a path or glob relative to the project")
    return ArtifactSpec(
        key=str(at),
        pattern=tv.text(table["path"], at.child("path"), tv.MAX_PATH),
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
        cwd=base / tv.text(table.get("cwd", "."), at.child("cwd"), tv.MAX_PATH),
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


# [store]: each key gate.store.settings reads, and what it reads it as. A number may also
# be a string of digits and a flag a word ("yes"), as the environment gives them.
_STORE_KINDS: Mapping[str, str] = {
    **dict.fromkeys(("url", "endpoint", "region", "object-lock-mode", "spool-dir"), "a string"),
    "path-style": "true or false",
    **dict.fromkeys(
        ("object-lock-days", "multipart-threshold", "part-size", "connect-timeout", "attempts"),
        "a whole number",
    ),
}
STORE_KEYS = frozenset(_STORE_KINDS)


def _store(value: object, at: tv.At) -> tuple[tuple[str, Scalar], ...]:
    """``[store]``, checked here whatever the environment or ``--store`` overrides: known
    keys, each of a type the store reads, a string at most :data:`~tv.MAX_PATH` long (the
    store checks what the values say, on the settings it ends up with)."""
    table = tv.table(value, at)
    tv.check_keys(table, STORE_KEYS, at)
    out: list[tuple[str, Scalar]] = []
    for name, item in table.items():
        kind = _STORE_KINDS[name]
        # bool is an int: a flag is no number, and only path-style takes 1 and 0.
        flag = kind == "true or false" and isinstance(item, bool | int)
        number = kind == "a whole number" and isinstance(item, int | float)
        if isinstance(item, str):
            out.append((name, tv.any_text(item, at.child(name), tv.MAX_PATH)))
        elif flag or (number and not isinstance(item, bool)):
            out.append((name, item))
        else:
            raise at.child(name).fail(f"expected {kind}, got {tv.show(item)}")
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
            base / tv.text(key_file, at("signing").child("key_file"), tv.MAX_PATH)
            if key_file is not None
            else None
        ),
        store=_store(doc.get("store", {}), at("store")),
        python=_python(doc.get("python"), at("python"), base),
        strict_libraries=tv.texts(
            doc.get("strict_libraries", []), at("strict_libraries"), tv.MAX_PATH
        ),
        host=_choice(doc.get("host"), at("host"), HOSTS),
        stale_fails=_choice(doc.get("stale_artifacts", "warn"), at("stale_artifacts"), _STALE)
        == "fail",
        policy=policy_table.read(doc, root),
        image=tv.text(doc["image"], at("image"), tv.MAX_PATH) if "image" in doc else None,
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
    runtime = (
        tv.text(table["runtime"], at.child("runtime"), tv.MAX_PATH) if "runtime" in table else None
    )
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
    text = tv.text(value, at, tv.MAX_PATH)
    return str(base / text) if "/" in text and not text.startswith("/") else text
