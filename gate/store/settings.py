"""Where evidence goes: StoreSettings, read from the environment and the project's config file.

Sources, highest first: ``CUDA_GATE_*`` environment variables, then the ``[store]``
table of the same configuration the run uses (gate.config: ``--config``, else
``cuda-gate.toml``, else ``[tool.cuda-gate]`` in ``pyproject.toml``).
With nothing configured the store is a local folder. Credentials never live
here: the S3 client uses the standard AWS chain (environment, profile, role).
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from gate.config import Config
from gate.config import load as load_config
from gate.errors import ConfigError
from gate.errors import shown as _shown

MIB = 1 << 20
# S3 refuses multipart parts below 5 MiB (except the last one).
MIN_PART_SIZE = 5 * MIB
MAX_PART_SIZE = 5 << 30
DEFAULT_THRESHOLD = 8 * MIB

_ENV_KEYS = {
    "CUDA_GATE_STORE": "url",
    "CUDA_GATE_S3_ENDPOINT": "endpoint",
    "CUDA_GATE_S3_REGION": "region",
    "CUDA_GATE_S3_PATH_STYLE": "path-style",
    "CUDA_GATE_OBJECT_LOCK_MODE": "object-lock-mode",
    "CUDA_GATE_OBJECT_LOCK_DAYS": "object-lock-days",
    "CUDA_GATE_MULTIPART_THRESHOLD": "multipart-threshold",
    "CUDA_GATE_SPOOL_DIR": "spool-dir",
}
STORE_VARIABLES = tuple(_ENV_KEYS)  # every variable that configures the store (tests clear them)


def data_home(env: Mapping[str, str]) -> Path:
    """``$XDG_DATA_HOME/cuda-gate`` or ``~/.local/share/cuda-gate``."""
    base = env.get("XDG_DATA_HOME") or str(Path.home() / ".local" / "share")
    return Path(base) / "cuda-gate"


@dataclass(frozen=True)
class StoreSettings:
    """A validated store configuration; ``source`` says where it was read from."""

    kind: Literal["local", "s3"]
    local_dir: Path | None = None
    bucket: str = ""
    prefix: str = ""
    endpoint: str | None = None
    region: str | None = None
    path_style: bool = False
    object_lock_mode: Literal["COMPLIANCE", "GOVERNANCE"] | None = None
    object_lock_days: int | None = None
    multipart_threshold: int = DEFAULT_THRESHOLD
    part_size: int = DEFAULT_THRESHOLD
    connect_timeout: float = 5.0
    attempts: int = 3
    spool_dir: Path = Path("gate-spool")
    source: str = "defaults"
    # The settings the user gave (keys of [store]): only these are passed to botocore, so
    # nothing cuda-gate assumes overrides AWS_MAX_ATTEMPTS, AWS_RETRY_MODE, a profile's
    # addressing_style or AWS_REQUEST_CHECKSUM_CALCULATION.
    given: frozenset[str] = frozenset()

    def describe(self) -> str:
        """The store as a person would name it: a folder or ``s3://bucket/prefix``."""
        if self.kind == "local":
            return str(self.local_dir)
        tail = f"/{self.prefix}" if self.prefix else ""
        where = f" at {self.endpoint}" if self.endpoint else ""
        return f"s3://{self.bucket}{tail}{where}"


def local_settings(directory: Path, spool_dir: Path | None = None) -> StoreSettings:
    """Settings for a local folder store with its spool beside it, as tests make one
    (``--store PATH`` goes through :func:`load_settings`)."""
    return StoreSettings(
        kind="local", local_dir=directory, spool_dir=spool_dir or directory.parent / "spool"
    )


def load_settings(
    project_dir: Path | None = None,
    env: Mapping[str, str] | None = None,
    *,
    url: str | None = None,
    config: Config | None = None,
) -> StoreSettings:
    """Read the settings from ``env`` (default os.environ) over the configuration's [store].

    ``config`` is the configuration the run uses (default: the one gate.config finds in
    ``project_dir``); ``url`` (a command's ``--store``) takes precedence over
    CUDA_GATE_STORE and the file.
    """
    env = os.environ if env is None else env
    if config is None:
        config = load_config(Path.cwd() if project_dir is None else project_dir)
    table = dict(config.store)
    origin = f"{config.label} [{config.prefix}store]"
    values: dict[str, tuple[Any, str]] = {}
    for key, value in table.items():
        if key not in _CHECKS:
            raise ConfigError(
                f"{origin}: unknown key {_shown(key)} (known: {', '.join(sorted(_CHECKS))})"
            )
        values[key] = (value, f"{origin}: key {key!r}")
        # Each of the file's values is checked on its own, whatever overrides it below: an
        # invalid configuration is exit 7 even where CUDA_GATE_STORE names the store.
        _CHECKS[key](values[key])
    for name, key in _ENV_KEYS.items():
        if env.get(name, "").strip():
            values[key] = (env[name].strip(), f"environment variable {name}")
    if url is not None:
        values["url"] = (url.strip(), "--store")
    sources = sorted({where.split(":")[0] for _, where in values.values()})
    return _build(values, env, ", ".join(sources) or "defaults")


def _build(
    values: Mapping[str, tuple[Any, str]], env: Mapping[str, str], source: str
) -> StoreSettings:
    def get(key: str) -> tuple[Any, str] | None:
        return values.get(key)

    home = data_home(env)
    spool = _path(get("spool-dir")) or home / "spool"
    url_item = get("url")
    common: dict[str, Any] = {"spool_dir": spool, "source": source, "given": frozenset(values)}
    where = url_item[1] if url_item else "url"
    scheme, rest = store_url(url_item[0], where) if url_item else ("file", "")
    if scheme == "file":
        local = Path(rest).expanduser() if rest else home / "evidence"
        for key in ("endpoint", "object-lock-mode"):
            item = get(key)
            if item and str(item[0]).strip():
                raise ConfigError(
                    f"{item[1]}: set, but the store is the local folder {local}; "
                    "set CUDA_GATE_STORE=s3://bucket/prefix"
                )
        return StoreSettings(kind="local", local_dir=local, **common)
    bucket, prefix = _bucket(rest, where)
    mode, days = _lock(get("object-lock-mode"), get("object-lock-days"))
    threshold = _threshold(get("multipart-threshold"))
    region = get("region")
    return StoreSettings(
        kind="s3",
        bucket=bucket,
        prefix=prefix.strip("/"),
        endpoint=_endpoint(get("endpoint")),
        region=str(region[0]).strip() or None if region else None,
        path_style=_bool(get("path-style")),
        object_lock_mode=mode,
        object_lock_days=days,
        multipart_threshold=threshold,
        part_size=_int(get("part-size"), threshold, minimum=MIN_PART_SIZE, maximum=MAX_PART_SIZE),
        connect_timeout=float(_connect_timeout(get("connect-timeout"))),
        attempts=_attempts(get("attempts")),
        **common,
    )


def _bucket(rest: str, where: str) -> tuple[str, str]:
    """An s3:// URL's bucket and prefix (``rest``: what follows ``s3://``), the bucket checked."""
    bucket, _, prefix = rest.partition("/")
    if not 3 <= len(bucket) <= 63:
        raise ConfigError(f"{where}: bucket name {_shown(bucket)} is not 3-63 characters")
    if not _BUCKET.fullmatch(bucket):
        # Checked here, not when the run's evidence is first stored: a typo fails at once.
        raise ConfigError(
            f"{where}: bucket name {_shown(bucket)} holds characters other than letters, "
            "digits, '.', '-' and '_'"
        )
    return bucket, prefix


def _location(item: tuple[Any, str] | None) -> None:
    """A store URL checked as :func:`_build` reads it: its scheme, and an s3 bucket's name."""
    if item is not None:
        scheme, rest = store_url(item[0], item[1])
        if scheme == "s3":
            _bucket(rest, item[1])


def _endpoint(item: tuple[Any, str] | None) -> str | None:
    """The endpoint URL, None where unset or blank."""
    if item is None or not str(item[0]).strip():
        return None
    text = str(item[0]).strip()
    if not _ENDPOINT.fullmatch(text):
        raise ConfigError(
            f"{item[1]}: {_shown(item[0])} is not an endpoint URL "
            "(http://host:port or https://host)"
        )
    return text


def _threshold(item: tuple[Any, str] | None) -> int:
    return _int(item, DEFAULT_THRESHOLD, minimum=MIN_PART_SIZE, maximum=MAX_PART_SIZE)


def _connect_timeout(item: tuple[Any, str] | None) -> int:
    return _int(item, 5, minimum=1, maximum=600)


def _attempts(item: tuple[Any, str] | None) -> int:
    return _int(item, 3, minimum=1, maximum=20)


def _lock_days(item: tuple[Any, str] | None) -> int:
    return _int(item, 0, minimum=1, maximum=36500)


# A URL's scheme (RFC 3986: a letter, then letters, digits, "+", "-", "."), before "://".
_SCHEME = re.compile(r"([A-Za-z][A-Za-z0-9+.-]*)://(.*)", re.DOTALL)
# What botocore accepts as a bucket name (S3-compatible servers allow more than AWS does).
_BUCKET = re.compile(r"[A-Za-z0-9._-]+")
_ENDPOINT = re.compile(r"https?://[^\s/?#]+(/\S*)?", re.IGNORECASE)
_URL_FORMS = "s3://bucket/prefix, file:///path, or a folder path"


def store_url(value: object, where: str) -> tuple[Literal["s3", "file"], str]:
    """``("s3", "bucket/prefix")`` or ``("file", folder)`` (empty: the default folder).

    Schemes are case-insensitive (``S3://`` is ``s3://``); ``file://`` takes an absolute
    path on this host; any other scheme, or a value that is not text, is a ConfigError
    naming where the value came from: a typo never becomes a folder in the working
    directory.
    """
    if not isinstance(value, str):
        raise ConfigError(f"{where}: {_shown(value)} is not a store URL ({_URL_FORMS})")
    text = value.strip()
    if "\0" in text:
        raise ConfigError(f"{where}: the store URL holds a NUL byte")
    match = _SCHEME.fullmatch(text)
    if match is None:
        return "file", text
    scheme, rest = match.group(1).lower(), match.group(2)
    if scheme == "s3":
        return "s3", rest
    if scheme == "file":
        host, slash, path = rest.partition("/")
        if host not in ("", "localhost") or not slash:
            raise ConfigError(
                f"{where}: {_shown(text)}: a file:// URL names a folder on this machine "
                "(file:///path)"
            )
        return "file", "/" + path
    hint = (
        "an S3-compatible server's address is the endpoint setting "
        "(CUDA_GATE_S3_ENDPOINT); the store is s3://bucket/prefix"
        if scheme in ("http", "https")
        else None
    )
    raise ConfigError(
        f"{where}: unknown store scheme {scheme!r} in {_shown(text)} ({_URL_FORMS})",
        hint=hint,
    )


def _lock(
    mode_item: tuple[Any, str] | None, days_item: tuple[Any, str] | None
) -> tuple[Literal["COMPLIANCE", "GOVERNANCE"] | None, int | None]:
    if mode_item is None or not str(mode_item[0]).strip():
        if days_item is not None:
            raise ConfigError(f"{days_item[1]}: set without an object-lock mode")
        return None, None
    checked = _mode(mode_item)
    if days_item is None:
        raise ConfigError(f"{mode_item[1]}: object-lock mode needs object-lock-days too")
    return checked, _lock_days(days_item)


def _mode(item: tuple[Any, str] | None) -> Literal["COMPLIANCE", "GOVERNANCE"] | None:
    """The object-lock mode, None where unset or blank."""
    if item is None or not str(item[0]).strip():
        return None
    mode = str(item[0]).strip().upper()
    if mode == "COMPLIANCE":
        return "COMPLIANCE"
    if mode == "GOVERNANCE":
        return "GOVERNANCE"
    raise ConfigError(f"{item[1]}: {_shown(item[0])} is not COMPLIANCE or GOVERNANCE")


def _int(
    item: tuple[Any, str] | None, default: int, *, minimum: int, maximum: int = 1 << 40
) -> int:
    """A whole number in ``[minimum, maximum]`` from TOML or an environment variable."""
    if item is None:
        return default
    value, where = item
    number: int | None = None
    if isinstance(value, int) and not isinstance(value, bool):
        number = value
    elif isinstance(value, float) and value.is_integer():
        number = int(value)
    elif isinstance(value, str) and value.strip().lstrip("-").isdecimal() and len(value) < 20:
        number = int(value.strip())
    if number is None or not minimum <= number <= maximum:
        raise ConfigError(
            f"{where}: {_shown(value)} is not a whole number from {minimum} to {maximum}"
        )
    return number


def _bool(item: tuple[Any, str] | None) -> bool:
    if item is None:
        return False
    value, where = item
    if isinstance(value, bool):
        return value
    text = str(value).strip().lower()
    if text in {"1", "true", "yes", "on"}:
        return True
    if text in {"0", "false", "no", "off", ""}:
        return False
    raise ConfigError(f"{where}: {_shown(value)} is not true or false")


def _path(item: tuple[Any, str] | None) -> Path | None:
    if item is None:
        return None
    if not isinstance(item[0], str) or not item[0].strip():
        raise ConfigError(f"{item[1]}: expected a folder path")
    return Path(item[0]).expanduser()


def _region(item: tuple[Any, str] | None) -> None:
    """Any region name: botocore's to judge."""
    del item


# Each [store] key's value checked on its own (its combination with the others is _build's).
_CHECKS: dict[str, Callable[[tuple[Any, str] | None], object]] = {
    "url": _location,
    "endpoint": _endpoint,
    "region": _region,
    "path-style": _bool,
    "object-lock-mode": _mode,
    "object-lock-days": _lock_days,
    "multipart-threshold": _threshold,
    "part-size": _threshold,
    "connect-timeout": _connect_timeout,
    "attempts": _attempts,
    "spool-dir": _path,
}
