"""Readers for values of a TOML configuration: each checks one type and names the key on failure.

A position is an :class:`At` (``cuda-gate.toml: entry_point[1].timeout``); every reader
raises ConfigError with that position and what it expected, on one line.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from typing import Any

from gate.config.shellsplit import split
from gate.errors import ConfigError

# How much of a user's value an error line quotes: a 1 MB value is not echoed whole.
SHOWN_CHARS = 60

# How large a configuration and each of its values may be: sizes no real project comes
# near, so a runaway value (a 100 MB command string) stops the load at once instead of
# being copied into every command line, message and evidence file of the run.
# gate/schemas/config.schema.json (maxLength) and docs/configuration.md say the same.
MAX_FILE_BYTES = 1 << 20  # the file: tomllib parses 1 MiB in well under a second
MAX_TEXT = 65_536  # characters of any other string; a command's arguments together
MAX_PATH = 4_096  # a path, a glob or an image reference: Linux's PATH_MAX
MAX_NAME = 128  # a build or entry point name (a file name in the evidence), a variable name


class At:
    """A position in the file, for messages: ``cuda-gate.toml: entry_point[1].timeout``."""

    def __init__(self, label: str, key: str) -> None:
        self.label = label
        self.key = key

    def __str__(self) -> str:
        return f"{self.label}: {self.key}"

    def child(self, name: str | int) -> At:
        """The position of a member: ``key[1]`` for an index, ``key.name`` for a name."""
        if isinstance(name, int):
            return At(self.label, f"{self.key}[{name}]")
        name = clip(name)  # a table's key is the user's text too
        return At(self.label, f"{self.key}.{name}" if self.key else name)

    def fail(self, message: str) -> ConfigError:
        """The error to raise for a problem at this position."""
        return ConfigError(f"{self}: {message}")


def clip(text: str) -> str:
    """A user's text as an error line holds it: whole when short, else its first
    :data:`SHOWN_CHARS` characters and its size."""
    if len(text) <= SHOWN_CHARS:
        return text
    return f"{text[:SHOWN_CHARS]}... ({_size(text)} bytes)"


def quote(text: str) -> str:
    """A user's text quoted for an error line (``'sm_9O'``), cut short like :func:`clip`."""
    if len(text) <= SHOWN_CHARS:
        return repr(text)
    return f"{text[:SHOWN_CHARS]!r}... ({_size(text)} bytes)"


def _size(text: str) -> int:
    return len(text.encode("utf-8", "surrogatepass"))


def show(value: object) -> str:
    """A value as the message quotes it, short."""
    if isinstance(value, dict):
        return "a table"
    return quote(value) if isinstance(value, str) else clip(repr(value))


def check_keys(table: Mapping[str, Any], known: frozenset[str], at: At) -> None:
    """Refuse any key of ``table`` not in ``known``."""
    for name in table:
        if name not in known:
            raise at.child(name).fail(f"unknown key (known: {', '.join(sorted(known))})")


def text(value: object, at: At, limit: int = MAX_TEXT) -> str:
    """A non-empty string of at most ``limit`` characters without a NUL."""
    value = any_text(value, at, limit)
    if not value.strip():
        raise at.fail("expected a non-empty string")
    return value


def any_text(value: object, at: At, limit: int = MAX_TEXT) -> str:
    """A string, possibly empty, of at most ``limit`` characters without a NUL."""
    if not isinstance(value, str):
        raise at.fail(f"expected a string, got {show(value)}")
    return no_nul(bounded(value, at, limit), at)


def bounded(value: str, at: At, limit: int) -> str:
    """``value`` when it holds at most ``limit`` characters; else the error naming its size."""
    if len(value) > limit:
        start = quote(value[:SHOWN_CHARS])
        raise at.fail(f"too long: {len(value):,} characters (at most {limit:,}): {start}...")
    return value


def no_nul(value: str, at: At) -> str:
    """``value`` when it holds no NUL: no argument, path or environment variable can (execve
    and open take C strings), so one is refused here, not where the command starts."""
    if "\0" in value:
        raise at.fail(f"{quote(value)}: holds a NUL character (\\0)")
    return value


def texts(value: object, at: At, limit: int = MAX_TEXT) -> tuple[str, ...]:
    """A list of non-empty strings of at most ``limit`` characters each."""
    if not isinstance(value, list):
        raise at.fail(f"expected a list of strings, got {show(value)}")
    return tuple(text(item, at.child(i), limit) for i, item in enumerate(value))


MAX_SECONDS = 7 * 24 * 3600.0


def seconds(value: object, at: At) -> float:
    """A positive, finite number of seconds up to a week (never a boolean)."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise at.fail(f"expected a number, got {show(value)}")
    return positive_seconds(value, at.fail)


def positive_seconds(value: float, fail: Callable[[str], Exception]) -> float:
    """``value`` as seconds when it is finite, > 0 and at most a week; else ``fail(why)``."""
    try:
        number = float(value)
    except (OverflowError, ValueError) as e:
        raise fail(f"expected a positive number of seconds, got {show(value)}") from e
    if not math.isfinite(number) or not 0 < number <= MAX_SECONDS:
        raise fail(
            f"expected a positive number of seconds up to {MAX_SECONDS:g}, got {show(value)}"
        )
    return number


def integer(value: object, at: At, *, low: int = -(2**31), high: int = 2**31 - 1) -> int:
    """An integer in ``[low, high]`` (never a boolean)."""
    if isinstance(value, bool) or not isinstance(value, int):
        raise at.fail(f"expected an integer, got {show(value)}")
    if not low <= value <= high:
        raise at.fail(f"expected an integer from {low} to {high}, got {show(value)}")
    return value


def flag(value: object, at: At) -> bool:
    """true or false."""
    if not isinstance(value, bool):
        raise at.fail(f"expected true or false, got {show(value)}")
    return value


def table(value: object, at: At) -> dict[str, Any]:
    """A table."""
    if not isinstance(value, dict):
        raise at.fail(f"expected a table, got {show(value)}")
    return value


def tables(value: object, at: At) -> list[dict[str, Any]]:
    """An array of tables (``[[name]]``)."""
    if not isinstance(value, list):
        name = at.key.rsplit(".", 1)[-1]
        raise at.fail(f"expected an array of tables ([[{name}]]), got {show(value)}")
    return [table(item, at.child(i)) for i, item in enumerate(value)]


def command(owner: Mapping[str, Any], at: At) -> tuple[str, ...]:
    """``owner["command"]``: a list of arguments, or one string split like a POSIX shell;
    at most :data:`MAX_TEXT` characters either way (a list's arguments joined by spaces)."""
    where = at.child("command")
    if "command" not in owner:
        raise where.fail("missing: give a list of arguments or one string")
    value = owner["command"]
    if isinstance(value, str):
        try:
            argv = tuple(split(any_text(value, where)))
        except ValueError as e:
            raise where.fail(f"cannot split the string like a shell: {e}") from e
    elif isinstance(value, list):
        argv = tuple(any_text(item, where.child(i)) for i, item in enumerate(value))
        joined = sum(map(len, argv)) + len(argv) - 1
        if joined > MAX_TEXT:
            raise where.fail(
                f"too long: {joined:,} characters in its arguments together (at most {MAX_TEXT:,})"
            )
    else:
        raise where.fail(f"expected a list of arguments or a string, got {show(value)}")
    if not argv or not argv[0].strip():
        raise where.fail("empty command")
    return argv


def environment(value: object, at: At) -> tuple[tuple[str, str], ...]:
    """A table of variable names (no NUL, no ``=``; :data:`MAX_NAME` characters) to string
    values."""
    pairs = []
    for name, item in table(value, at).items():
        if "=" in no_nul(bounded(name, at, MAX_NAME), at.child(name)) or not name:
            raise at.child(name).fail("not a variable name (empty, or holds '=')")
        pairs.append((name, any_text(item, at.child(name))))
    return tuple(pairs)
