"""Keep secrets out of the evidence: values of secret-looking environment variables.

A CI job hands secrets to the gate through environment variables (the signing
key, storage credentials, a GitHub token). Any of them can end up in a tool's
output or a log line. Every text file the gate writes, and the manifest, passes
through :func:`redact` first, which replaces those values with ``[redacted]``.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from typing import Any

REDACTED = "[redacted]"

# Names that look like they hold a secret (matched anywhere in the name, any case).
_SECRET_NAME = re.compile(r"TOKEN|KEY|SECRET|PASSWORD|PASSWD|CREDENTIAL", re.IGNORECASE)
# Shorter values ("1", "true", "us-east") are settings, not secrets, and replacing
# them everywhere would destroy the evidence.
MIN_SECRET_LENGTH = 8
# A multi-line secret (a PEM key) is also redacted line by line, for long lines.
_MIN_LINE_LENGTH = 16


def is_secret_name(name: str) -> bool:
    """Whether an environment variable's name looks like it holds a secret."""
    return _SECRET_NAME.search(name) is not None


def secret_items(environ: Mapping[str, str] | None = None) -> tuple[tuple[str, str], ...]:
    """(variable name, secret text) pairs from ``environ``, longest text first.

    Multi-line values contribute the whole value and each long line, so a key
    printed one line at a time is caught too. Very short values are ignored.
    """
    env = os.environ if environ is None else environ
    found: dict[str, str] = {}
    for name, value in sorted(env.items()):
        if not is_secret_name(name):
            continue
        stripped = value.strip()
        candidates = [value, stripped] if len(stripped) >= MIN_SECRET_LENGTH else []
        lines = (line.strip() for line in value.splitlines())
        candidates += [line for line in lines if len(line) >= _MIN_LINE_LENGTH]
        for text in candidates:
            if text:
                found.setdefault(text, name)
    # Longest first, so a whole value is replaced before any of its lines.
    ordered = sorted(found.items(), key=lambda item: (-len(item[0]), item[0]))
    return tuple((name, text) for text, name in ordered)


def secret_values(environ: Mapping[str, str] | None = None) -> tuple[str, ...]:
    """Values of the secret-looking variables in ``environ``, longest first."""
    return tuple(text for _, text in secret_items(environ))


def redact(text: str, environ: Mapping[str, str] | None = None) -> str:
    """``text`` with every secret value from ``environ`` replaced by ``[redacted]``."""
    return redact_values(text, secret_values(environ))


def redact_values(text: str, secrets: tuple[str, ...]) -> str:
    """``text`` with each of ``secrets`` replaced; pass ``secret_values()`` computed once."""
    for value in secrets:
        if value in text:
            text = text.replace(value, REDACTED)
    return text


def redact_json(data: Any, secrets: tuple[str, ...]) -> Any:  # noqa: ANN401 - any JSON value
    """A copy of a JSON value with every string (keys included) passed through redaction.

    Redacting the parsed value rather than the serialized text also catches
    secrets holding characters JSON escapes (quotes, backslashes, newlines).
    """
    if isinstance(data, str):
        return redact_values(data, secrets)
    if isinstance(data, list):
        return [redact_json(item, secrets) for item in data]
    if isinstance(data, dict):
        return {redact_values(str(k), secrets): redact_json(v, secrets) for k, v in data.items()}
    return data


def leaked_names(data: bytes, environ: Mapping[str, str] | None = None) -> tuple[str, ...]:
    """Names of the secret-looking variables whose values occur in ``data``; never the values."""
    names = {name for name, text in secret_items(environ) if text.encode("utf-8") in data}
    return tuple(sorted(names))
