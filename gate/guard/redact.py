"""Keep secrets out of children and out of the evidence.

Two rules, both here:

1. **Children never receive the gate's own secrets.** Every process the gate starts
   (builds, entry points, tools) gets the environment minus :data:`GATE_SECRETS`:
   the signing key and the variable naming its file, store credentials, GitHub
   tokens, and the Actions runtime/OIDC tokens. A build has no use for them, and a
   build that prints its environment must not put them into the evidence.
2. **Nothing secret is written.** Every evidence file and the manifest pass through
   a :class:`Redactor`, which replaces the values of secret-looking environment
   variables, and any other secret the gate holds (the signing key's PEM, however
   it was given), with ``[redacted]``.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

REDACTED = "[redacted]"

# The gate's own secrets: removed from every child's environment (documented in docs/secrets.md).
GATE_SECRETS = frozenset(
    {
        "CUDA_GATE_SIGNING_KEY",
        "CUDA_GATE_SIGNING_KEY_FILE",
        "AWS_ACCESS_KEY_ID",
        "AWS_SECRET_ACCESS_KEY",
        "AWS_SESSION_TOKEN",
        "AWS_SECURITY_TOKEN",
        "AWS_WEB_IDENTITY_TOKEN_FILE",
        "AWS_CONTAINER_AUTHORIZATION_TOKEN",
        "AWS_CONTAINER_AUTHORIZATION_TOKEN_FILE",
        "GITHUB_TOKEN",
        "GH_TOKEN",
        "GH_ENTERPRISE_TOKEN",
        "ACTIONS_RUNTIME_TOKEN",
        "ACTIONS_ID_TOKEN_REQUEST_TOKEN",
        "ACTIONS_ID_TOKEN_REQUEST_URL",
    }
)

# Names that look like they hold a secret (matched anywhere in the name, any case).
_SECRET_NAME = re.compile(r"TOKEN|KEY|SECRET|PASSWORD|PASSWD|CREDENTIAL", re.IGNORECASE)
# Shorter values ("1", "true", "us-east") are settings, not secrets, and replacing
# them everywhere would destroy the evidence.
MIN_SECRET_LENGTH = 8
# A multi-line secret (a PEM key) is also redacted line by line, for long lines.
_MIN_LINE_LENGTH = 16


def child_environment(environ: Mapping[str, str]) -> dict[str, str]:
    """``environ`` without the gate's own secrets: what every child process gets."""
    return {k: v for k, v in environ.items() if k not in GATE_SECRETS}


def is_secret_name(name: str) -> bool:
    """Whether an environment variable's name looks like it holds a secret."""
    return name in GATE_SECRETS or _SECRET_NAME.search(name) is not None


def _candidates(value: str) -> list[str]:
    """A secret's texts to look for: the whole value and each long line (a PEM key)."""
    stripped = value.strip()
    found = [value, stripped] if len(stripped) >= MIN_SECRET_LENGTH else []
    lines = (line.strip() for line in value.splitlines())
    found += [line for line in lines if len(line) >= _MIN_LINE_LENGTH]
    return [text for text in found if text]


def secret_items(environ: Mapping[str, str] | None = None) -> tuple[tuple[str, str], ...]:
    """(variable name, secret text) pairs from ``environ``, longest text first."""
    env = os.environ if environ is None else environ
    found: dict[str, str] = {}
    for name, value in sorted(env.items()):
        if is_secret_name(name):
            for text in _candidates(value):
                found.setdefault(text, name)
    ordered = sorted(found.items(), key=lambda item: (-len(item[0]), item[0]))
    return tuple((name, text) for text, name in ordered)


@dataclass(frozen=True)
class Redactor:
    """The secrets to keep out of what the gate writes, each with the name it goes by."""

    items: tuple[tuple[str, str], ...] = ()

    @classmethod
    def from_environment(
        cls,
        environ: Mapping[str, str] | None = None,
        extra: Iterable[tuple[str, str]] = (),
    ) -> Redactor:
        """Secret-looking variables of ``environ`` plus ``extra`` (name, secret) pairs."""
        found = {text: name for name, text in secret_items(environ)}
        for name, value in extra:
            for text in _candidates(value):
                found.setdefault(text, name)
        ordered = sorted(found.items(), key=lambda item: (-len(item[0]), item[0]))
        return cls(tuple((name, text) for text, name in ordered))

    @property
    def values(self) -> tuple[str, ...]:
        """The secret texts, longest first (a whole value before any of its lines)."""
        return tuple(text for _, text in self.items)

    def text(self, text: str) -> str:
        """``text`` with every secret replaced by ``[redacted]``."""
        for value in self.values:
            if value in text:
                text = text.replace(value, REDACTED)
        return text

    def json(self, data: Any) -> Any:  # noqa: ANN401 - any JSON value
        """A copy of a JSON value with every string (keys included) redacted.

        Redacting the parsed value rather than the serialized text also catches
        secrets holding characters JSON escapes (quotes, backslashes, newlines).
        """
        if isinstance(data, str):
            return self.text(data)
        if isinstance(data, list):
            return [self.json(item) for item in data]
        if isinstance(data, dict):
            return {self.text(str(k)): self.json(v) for k, v in data.items()}
        return data

    def leaked_names(self, data: bytes) -> tuple[str, ...]:
        """Names of the secrets whose text occurs in ``data``; never the texts."""
        return tuple(sorted({name for name, text in self.items if text.encode() in data}))


class StreamRedactor:
    """Text that comes in pieces (a log written while its command runs), redacted.

    A secret may arrive split across two pieces: an end of the text that could be the
    start of a secret is held back until the next piece or :meth:`end`, and so is a
    whole secret the cut would split (a short secret inside a longer one).
    """

    def __init__(self, redactor: Redactor) -> None:
        self.redactor = redactor
        self.pending = ""

    def feed(self, text: str) -> str:
        """The redacted text that is safe to write now."""
        self.pending += text
        pending = self.pending
        cut = len(pending) - max((_started(pending, v) for v in self.redactor.values), default=0)
        moved = True
        while moved and cut > 0:
            moved = False
            for value in self.redactor.values:
                # An occurrence straddling the cut goes out whole, next time.
                at = pending.find(value, max(0, cut - len(value) + 1))
                if -1 < at < cut < at + len(value):
                    cut, moved = at, True
        if cut <= 0:
            return ""
        ready, self.pending = pending[:cut], pending[cut:]
        return self.redactor.text(ready)

    def end(self) -> str:
        """What is held back, redacted: the stream has ended."""
        ready, self.pending = self.pending, ""
        return self.redactor.text(ready)


def _started(text: str, value: str) -> int:
    """The length of the longest end of ``text`` that ``value`` starts with (not all of it)."""
    at = text.find(value[0], max(0, len(text) - len(value) + 1)) if value else -1
    while at != -1:
        if value.startswith(text[at:]):
            return len(text) - at
        at = text.find(value[0], at + 1)
    return 0
