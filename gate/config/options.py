"""Every user-facing option in one table, and the one cascade: CLI > environment > config > default.

The way cibuildwheel's ``OptionsReader`` is one place: each :class:`Option` names its
command-line flag, its environment variables (highest first), its configuration key and
its default, and :func:`resolve` (or :func:`resolve_all`, for several at once) applies

    1. the command line (a flag left out is ``None``; for an option whose ``blank_cli`` is
       set an empty string counts as left out too, as ``args.x or ...`` always treated it),
    2. the environment (an unset or empty variable counts as unset; the option's parser may
       also say a value counts as unset, as ``CUDA_GATE_SIGNING_KEY`` of blanks does),
    3. the configuration (the already validated :class:`~gate.config.records.Config`),
    4. the default,

and says where the value came from (:attr:`Resolved.source`: ``--key``,
``CUDA_GATE_PUBLIC_KEY_FILE``, ``cuda-gate.toml: signing.key_file`` or ``default``).
Every value given is checked, layer by layer (the command line first, then the
environment), even one a higher layer overrides: a bad ``CUDA_GATE_MAX_ENTRY_MB`` is one
ConfigError line naming the variable even beside ``--max-entry-mb``, as it always was.

Options whose cascade runs here (the commands resolve them and pass the values down):
``--signing-key``/``CUDA_GATE_SIGNING_KEY_FILE``/``CUDA_GATE_SIGNING_KEY``/``[signing]
key_file``; ``--key``/``CUDA_GATE_PUBLIC_KEY_FILE``; ``--runner-class``/
``CUDA_GATE_RUNNER_CLASS``; ``--nvcc``/``CUDA_GATE_NVCC``; ``--image``/``image``;
``--[no-]record-launches``/``record_launches``; ``--[no-]junit-file-attribute``;
``--max-*``/``CUDA_GATE_MAX_*``.

Options listed here whose cascade still runs where the value is used (:attr:`Option.read_by`),
because the reader carries the source into its own error lines or is read deep below the
commands: ``--python``/``CUDA_GATE_PYTHON``/``python`` (gate.system.machine.find_python,
whose errors say ``(from $CUDA_GATE_PYTHON)``); ``--store`` and the seven other store
variables over ``[store]`` (gate.store.settings.load_settings, which validates them as one
table); ``CUDA_GATE_CACHE_DIR`` (gate.scan.cache, under every cache); ``CUDA_GATE_HEARTBEAT``
(gate.render.live); ``CUDA_GATE_MAX_*`` for ``run`` (gate.reader.limits.Limits.from_env in
the stages, which a layer-3 reader cannot take from here).

Facts, not options, read where they are used: the CI run and runner (``CI``,
``GITHUB_*``, ``RUNNER_*``: gate.system.ci, gate.store.meta, commands/github; they say
where the gate runs, nobody sets them to configure it); the terminal (``NO_COLOR``,
``COLUMNS``, ``TERM``: gate.render); the toolkit's own (``CUDA_HOME``, ``CUDA_PATH``,
``NVCC_*``, ``LD_LIBRARY_PATH``, ``CUDA_VISIBLE_DEVICES``) and the XDG folders; the AWS
chain (gate.store.s3). Internal, never set by a person: ``CUDA_GATE_SEALED_FD``/``_PID``
(gate.guard.vault's hand-over), ``CUDA_GATE_LAUNCH_DIR``/``CUDA_GATE_LAUNCH_BYTES`` (the
gate tells its launch recorder), ``CUDA_GATE_IMAGE`` (the image the gate itself runs in).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from enum import Enum
from pathlib import Path
from typing import TYPE_CHECKING, Any, Generic, TypeVar, overload

from gate.reader.limits import ENV as LIMITS
from gate.reader.limits import parse_value

if TYPE_CHECKING:
    from gate.config.records import Config

T = TypeVar("T")

# The signing key's variables (gate.attest.signing reads them from here).
KEY_FILE_ENV = "CUDA_GATE_SIGNING_KEY_FILE"
KEY_PEM_ENV = "CUDA_GATE_SIGNING_KEY"
PUBLIC_KEY_FILE_ENV = "CUDA_GATE_PUBLIC_KEY_FILE"
RUNNER_CLASS_ENV = "CUDA_GATE_RUNNER_CLASS"
DEFAULT_PUBLIC_KEY = "cuda-gate.pub"


class Layer(Enum):
    """Where a value came from, highest first."""

    CLI = "command line"
    ENV = "environment"
    CONFIG = "configuration"
    DEFAULT = "default"


@dataclass(frozen=True)
class Resolved(Generic[T]):
    """An option's value and where it came from (``source``: the flag, the variable, the
    config key as ``<file>: <key>``, or ``default``)."""

    value: T
    source: str
    layer: Layer

    def origin(self) -> str:
        """For messages: ``from CUDA_GATE_...``, ``from --key``, ``by default``."""
        return "by default" if self.layer is Layer.DEFAULT else f"from {self.source}"


def _text(text: str, _variable: str) -> str:
    return text


def _path(text: str, _variable: str) -> Path:
    return Path(text)


def _signing_key(text: str, variable: str) -> Path | str | None:
    """The key file's path, or the PEM itself (blanks count as unset, as they always did)."""
    if variable == KEY_FILE_ENV:
        return Path(text)
    return text.strip() or None


def _bound(text: str, variable: str) -> int:
    return parse_value(text, variable)


@dataclass(frozen=True)
class Option(Generic[T]):
    """One user-facing option: where each layer holds it, its default, its parser.

    ``parse(text, where)`` turns an environment value (and, with ``parse_cli``, a
    command-line string) into the value, raising ConfigError naming ``where``, or returns
    None where the value counts as unset. ``config`` reads the validated configuration;
    ``key`` is how the file spells it. ``read_by`` names the module that still applies
    this cascade itself (None: commands resolve it here).
    """

    name: str
    flag: str | None = None
    env: tuple[str, ...] = ()
    key: str | None = None
    default: Any = None  # a T: an option without one is declared Option[X | None]
    parse: Callable[[str, str], T | None] = _text  # type: ignore[assignment]
    config: Callable[[Config], T | None] | None = None
    blank_cli: bool = False  # an empty string on the command line counts as left out
    parse_cli: bool = False  # the command line gives text this option's parser reads
    read_by: str | None = None

    @property
    def dest(self) -> str:
        """The argparse attribute the flag fills."""
        return (self.flag or self.name).lstrip("-").replace("-", "_")


SIGNING_KEY: Option[Path | str | None] = Option(
    "signing_key",
    flag="--signing-key",
    env=(KEY_FILE_ENV, KEY_PEM_ENV),
    key="signing.key_file",
    parse=_signing_key,
    config=lambda c: c.signing_key,
)
PUBLIC_KEY: Option[Path] = Option(
    "public_key",
    flag="--key",
    env=(PUBLIC_KEY_FILE_ENV,),
    default=Path(DEFAULT_PUBLIC_KEY),
    parse=_path,
)
RUNNER_CLASS: Option[str | None] = Option(
    "runner_class", flag="--runner-class", env=(RUNNER_CLASS_ENV,), blank_cli=True
)
NVCC: Option[str | None] = Option("nvcc", flag="--nvcc", env=("CUDA_GATE_NVCC",), blank_cli=True)
IMAGE: Option[str | None] = Option("image", flag="--image", key="image", config=lambda c: c.image)
RECORD_LAUNCHES: Option[bool] = Option(
    "record_launches",
    flag="--record-launches",
    key="record_launches",
    default=True,
    config=lambda c: c.record_launches,
)
# file= on junit.xml's cases, for GitHub's reporters; off: today's junit-10.xsd refuses it.
JUNIT_FILE_ATTRIBUTE: Option[bool] = Option(
    "junit_file_attribute", flag="--junit-file-attribute", default=False
)
MAX_ENTRY_MB: Option[int | None] = Option(
    "max_entry_mb",
    flag="--max-entry-mb",
    env=(LIMITS["entry"],),
    parse=_bound,
    parse_cli=True,
)
MAX_ARTIFACT_MB: Option[int | None] = Option(
    "max_artifact_mb",
    flag="--max-artifact-mb",
    env=(LIMITS["artifact"],),
    parse=_bound,
    parse_cli=True,
)
MAX_MEMBER_MB: Option[int | None] = Option(
    "max_member_mb",
    flag="--max-member-mb",
    env=(LIMITS["member"],),
    parse=_bound,
    parse_cli=True,
)
MAX_RATIO: Option[int | None] = Option(
    "max_ratio", flag="--max-ratio", env=(LIMITS["ratio"],), parse=_bound, parse_cli=True
)
# Resolved where they are used (``read_by``); listed so the table names every option.
PYTHON: Option[str | None] = Option(
    "python",
    flag="--python",
    env=("CUDA_GATE_PYTHON",),
    key="python",
    config=lambda c: c.python,
    blank_cli=True,
    read_by="gate.system.machine.find_python",
)
CACHE_DIR: Option[Path | None] = Option(
    "cache_dir", env=("CUDA_GATE_CACHE_DIR",), parse=_path, read_by="gate.scan.cache.cache_dir"
)
HEARTBEAT: Option[str | None] = Option(
    "heartbeat", env=("CUDA_GATE_HEARTBEAT",), read_by="gate.render.live.heartbeat_setting"
)
_STORE_SETTINGS = "gate.store.settings.load_settings"
STORE: Option[str | None] = Option(
    "store", flag="--store", env=("CUDA_GATE_STORE",), key="store.url", read_by=_STORE_SETTINGS
)
STORE_TABLE: tuple[Option[str | None], ...] = tuple(
    Option(
        f"store_{key.replace('-', '_')}",
        env=(variable,),
        key=f"store.{key}",
        read_by=_STORE_SETTINGS,
    )
    for variable, key in (
        ("CUDA_GATE_S3_ENDPOINT", "endpoint"),
        ("CUDA_GATE_S3_REGION", "region"),
        ("CUDA_GATE_S3_PATH_STYLE", "path-style"),
        ("CUDA_GATE_OBJECT_LOCK_MODE", "object-lock-mode"),
        ("CUDA_GATE_OBJECT_LOCK_DAYS", "object-lock-days"),
        ("CUDA_GATE_MULTIPART_THRESHOLD", "multipart-threshold"),
        ("CUDA_GATE_SPOOL_DIR", "spool-dir"),
    )
)

_TABLE: tuple[Option[Any], ...] = (
    SIGNING_KEY,
    PUBLIC_KEY,
    RUNNER_CLASS,
    NVCC,
    IMAGE,
    RECORD_LAUNCHES,
    JUNIT_FILE_ATTRIBUTE,
    MAX_ENTRY_MB,
    MAX_ARTIFACT_MB,
    MAX_MEMBER_MB,
    MAX_RATIO,
    PYTHON,
    CACHE_DIR,
    HEARTBEAT,
    STORE,
    *STORE_TABLE,
)
OPTIONS: Mapping[str, Option[Any]] = {o.name: o for o in _TABLE}
# Variables of the gate's own that are no option (see the module docstring).
INTERNAL_VARIABLES = (
    "CUDA_GATE_SEALED_FD",
    "CUDA_GATE_SEALED_PID",
    "CUDA_GATE_LAUNCH_DIR",
    "CUDA_GATE_LAUNCH_BYTES",
    "CUDA_GATE_IMAGE",
)


def _given(option: Option[T], args: object) -> Resolved[T] | None:
    value = getattr(args, option.dest, None) if option.flag is not None else None
    if value is None or (option.blank_cli and value == ""):
        return None
    where = option.flag or option.name
    if option.parse_cli and isinstance(value, str):
        value = option.parse(value, where)
        if value is None:
            return None
    return Resolved(value, where, Layer.CLI)


def _environment(option: Option[T], env: Mapping[str, str]) -> Resolved[T] | None:
    found: Resolved[T] | None = None
    for variable in option.env:
        text = env.get(variable, "")
        if not text:
            continue
        value = option.parse(text, variable)  # checked even where a higher one wins
        if value is not None and found is None:
            found = Resolved(value, variable, Layer.ENV)
    return found


def _configured(option: Option[T], config: Config | None) -> Resolved[T] | None:
    if config is None or option.config is None:
        return None
    value = option.config(config)
    if value is None:
        return None
    return Resolved(value, f"{config.label}: {config.prefix}{option.key}", Layer.CONFIG)


@overload
def resolve(
    option: Option[T],
    args: object = None,
    env: Mapping[str, str] | None = None,
    config: Config | None = None,
) -> Resolved[T]: ...
@overload
def resolve(
    option: str,
    args: object = None,
    env: Mapping[str, str] | None = None,
    config: Config | None = None,
) -> Resolved[Any]: ...
def resolve(
    option: Option[Any] | str,
    args: object = None,
    env: Mapping[str, str] | None = None,
    config: Config | None = None,
) -> Resolved[Any]:
    """``option`` (or its name) from ``args`` (argparse's namespace, or any object with the
    attribute), then ``env`` (default: none), then ``config``, then its default."""
    return resolve_all((option,), args, env, config)[0]


def resolve_all(
    options: Sequence[Option[Any] | str],
    args: object = None,
    env: Mapping[str, str] | None = None,
    config: Config | None = None,
) -> tuple[Resolved[Any], ...]:
    """Several options at once: every command-line value is checked, then every
    environment value, so the first bad value is the one a person gave most directly."""
    chosen = tuple(OPTIONS[o] if isinstance(o, str) else o for o in options)
    env = {} if env is None else env
    cli = [_given(o, args) for o in chosen]
    environment = [_environment(o, env) for o in chosen]
    return tuple(
        cli[i]
        or environment[i]
        or _configured(o, config)
        or Resolved(o.default, "default", Layer.DEFAULT)
        for i, o in enumerate(chosen)
    )


def describe(option: Option[Any]) -> str:
    """The option's layers in order, for docs and help: ``--key, CUDA_GATE_PUBLIC_KEY_FILE``."""
    named = [option.flag, *option.env, option.key and f"config {option.key}"]
    return ", ".join(n for n in named if n)
