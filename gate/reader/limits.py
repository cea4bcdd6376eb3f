"""How much work one artifact may make the reader do, and how a user raises the bounds.

Decompression is bounded by what is actually produced, never by a size a file claims:
a claim is only ever used to refuse early. Four bounds, each with an environment
variable (``cuda-gate inspect`` also takes them as options):

``CUDA_GATE_MAX_ENTRY_MB`` (default 256)
    one fatbin entry once decompressed; no real cubin or PTX text comes near it.
``CUDA_GATE_MAX_ARTIFACT_MB`` (default 16384)
    every decompressed entry of one artifact together (libcublasLt: about 1,700 MB).
``CUDA_GATE_MAX_MEMBER_MB`` (default 4096)
    one wheel member once inflated, or one file of a container image: disk, not memory
    (a member is streamed into an unnamed temporary file in TMPDIR, one at a time, and
    read mapped from there; an image file is written into the image's view).
``CUDA_GATE_MAX_RATIO`` (default 200)
    decompressed bytes per compressed byte, checked once an entry or member has
    produced more than 64 MB: real libraries compress 2-20x, bombs 1,000-30,000x.

A :class:`Budget` counts one artifact's decompressed bytes across the reader's threads.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Mapping
from dataclasses import dataclass, replace

from gate.errors import BadInputError, ConfigError

MB = 1 << 20
# Below this many produced bytes the ratio is not checked: small entries compress
# arbitrarily well (a PTX stub of newlines) and cost nothing.
RATIO_FLOOR = 64 * MB
# The largest value accepted for any bound: 1 PB in MB, far past any real file.
_MAX_VALUE = 1 << 30

ENV = {
    "entry": "CUDA_GATE_MAX_ENTRY_MB",
    "artifact": "CUDA_GATE_MAX_ARTIFACT_MB",
    "member": "CUDA_GATE_MAX_MEMBER_MB",
    "ratio": "CUDA_GATE_MAX_RATIO",
}
# How each bound is named in a refusal, so the person reading it knows what to raise.
_HOW_TO_RAISE = {
    "entry": f"raise {ENV['entry']} or --max-entry-mb",
    "artifact": f"raise {ENV['artifact']} or --max-artifact-mb",
    "member": f"raise {ENV['member']} or --max-member-mb",
    "ratio": f"raise {ENV['ratio']} or --max-ratio",
}


@dataclass(frozen=True, slots=True)
class Limits:
    """The reader's bounds, in bytes (``ratio`` is a plain factor)."""

    entry: int = 256 * MB
    artifact: int = 16384 * MB
    member: int = 4096 * MB
    ratio: int = 200

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None) -> Limits:
        """The defaults, overridden by the ``CUDA_GATE_MAX_*`` variables that are set."""
        env = os.environ if environ is None else environ
        values = {
            field: parse_value(env[var], var) for field, var in ENV.items() if env.get(var, "")
        }
        return cls.from_values(**values)

    @classmethod
    def from_values(cls, **values: int | None) -> Limits:
        """The defaults with the given values (MB for sizes, a factor for ``ratio``)."""
        return cls().overridden(**values)

    def overridden(self, **values: int | None) -> Limits:
        """A copy with the given values (MB for sizes, a factor for ``ratio``); None keeps one."""
        changes = {
            field: value if field == "ratio" else value * MB
            for field, value in values.items()
            if value is not None
        }
        unknown = set(changes) - set(ENV)
        if unknown:
            raise ConfigError(f"unknown reader limit(s): {', '.join(sorted(unknown))}")
        return replace(self, **changes)

    def refuse_ratio(self, produced: int, consumed: int) -> bool:
        """Whether ``produced`` bytes from ``consumed`` compressed bytes look like a bomb."""
        return produced > RATIO_FLOOR and produced > self.ratio * max(consumed, 1)


def parse_value(text: str, what: str) -> int:
    """A positive whole number of at most 10 digits; ConfigError naming ``what`` otherwise."""
    stripped = text.strip()
    # isascii: str.isdigit() also accepts '²' and other digits int() refuses or misreads.
    if not (stripped.isascii() and stripped.isdigit() and len(stripped) <= 10):
        raise ConfigError(f"{what}: not a positive whole number: {text[:40]!r}")
    value = int(stripped)
    if not 0 < value <= _MAX_VALUE:
        raise ConfigError(f"{what}: must be between 1 and {_MAX_VALUE}: {value}")
    return value


def hint(bound: str) -> str:
    """How to raise ``bound`` (``entry``, ``artifact``, ``member`` or ``ratio``)."""
    return _HOW_TO_RAISE[bound]


class Budget:
    """Decompressed bytes one artifact has used so far, shared by the reader's threads."""

    def __init__(self, limits: Limits, name: str) -> None:
        self.limits = limits
        self.name = name
        self.used = 0
        self._lock = threading.Lock()

    def charge(self, size: int, where: str) -> None:
        """Count ``size`` more bytes; BadInputError once the artifact's bound is passed."""
        with self._lock:
            self.used += size
            used = self.used
        if used > self.limits.artifact:
            raise BadInputError(
                f"{self.name}: {where}: decompressing past {self.limits.artifact // MB} MB "
                f"for one artifact; refusing ({hint('artifact')})"
            )
