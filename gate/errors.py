"""One exception base for cuda-gate; each subclass carries its exit code.

Only the CLI turns these into an exit status and a one-line message; everything
else raises them, always `from` the underlying cause.
"""

from __future__ import annotations

import sys
from enum import IntEnum


class ExitCode(IntEnum):
    """Process exit statuses, stable for scripts and CI; each with its README row.

    The README's "Exit statuses" table is :func:`markdown_table` of these, word for
    word (tests/test_exit_table.py): a code and its meaning are written here only.
    """

    meaning: str
    label: str

    def __new__(cls, value: int, meaning: str = "", label: str = "") -> ExitCode:
        member = int.__new__(cls, value)
        member._value_ = value
        member.meaning = meaning
        member.label = label or str(value)
        return member

    OK = 0, "accepted"
    NOT_ACCEPTED = (
        1,
        (
            "not accepted (a check failed, including the cuobjdump cross-check where cuobjdump "
            'refuses an artifact the gate\'s reader reads, such as "Invalid fatbin header": '
            "both readers' word is in the row; or the run stopped early: `--stop-after`), or "
            "`diff`/`--baseline` found a loss"
        ),
    )
    USAGE = (
        2,
        (
            "usage: an unknown option, a target or device that cannot be parsed, a bare `13` or "
            "`9` (write `13.0`), an empty `--target`"
        ),
    )
    TOOL = (
        3,
        (
            "a tool missing or failed, including a target the toolkit cannot build (refused "
            "before the run: nothing built, written or stored), a build step that failed (the "
            "full file system it wrote to named), no container runtime for "
            "`--image`, an image without nvcc, and the gate's own installed files changed "
            "(before the run, or by its project's commands: nothing signed or stored; "
            "docs/secrets.md)"
        ),
    )
    NO_DEVICE = 4, "no CUDA device, and nothing else wrong"
    EVIDENCE = (
        5,
        (
            "the evidence or build folder is not writable, not the gate's, or held by another "
            "run (`--wait` waits)"
        ),
    )
    BAD_INPUT = (
        6,
        (
            "a bad input file (an envelope over 64 MiB, a FIFO, device or link to one as an "
            "artifact, from `run` and `inspect` alike, a folder that is not gate evidence, a "
            "`diff` folder without a run record), or an `--image` that is no reference, that the "
            "runtime does not hold, or that it holds under another digest than the pinned one"
        ),
    )
    CONFIG = (
        7,
        (
            "bad configuration, all found before the run: a public key given as the signing "
            "key, a store URL, bucket or endpoint that cannot work, a configuration nested "
            "deeper than 64 levels or holding a NUL; error lines quote at most 60 characters "
            "of a value"
        ),
    )
    BAD_SIGNATURE = 10, "a bad signature"
    ARTIFACT_CHANGED = 11, "an artifact changed since it was gated"
    STALE_ENVIRONMENT = 12, "the environment differs from the recorded one"
    EVIDENCE_CHANGED = (
        13,
        (
            "evidence changed or missing, including `sign` of a folder changed in any way since "
            "the run (nothing signed), `verify` of an unsigned run, `evidence get` of a run the "
            "store does not hold, and a `--baseline`/`diff` reference the store holds no run for"
        ),
    )
    STALE_EVIDENCE = (
        14,
        (
            "evidence not of the required revision or too old "
            "(`verify --revision/--max-age/--not-before`)"
        ),
    )
    STORAGE = (
        20,
        (
            "storage unreachable or refusing (the run stays in the spool for `upload --resume`), "
            "also when the run was not accepted only for want of a device; a failed check keeps "
            "its own status"
        ),
    )
    GITHUB = 21, "the GitHub API"
    STORAGE_CONFLICT = (
        22,
        (
            "storage conflict: the store holds different evidence under the run's id (the run "
            "is kept aside in the spool)"
        ),
    )
    INTERRUPTED = (
        130,
        (
            "a signal: 130 SIGINT, 143 SIGTERM, 129 SIGHUP; the running commands' process groups "
            "are killed and the run is recorded as interrupted"
        ),
        "128 + N",
    )
    BROKEN_PIPE = (
        141,
        (
            "stdout closed before the output was written and no check failed "
            "(`cuda-gate inspect ... \\| head -1`); a failing check keeps its own status"
        ),
    )


def markdown_table() -> str:
    """The README's "Exit statuses" table, one row per :class:`ExitCode`, in order."""
    rows = ["| status | meaning |", "|---|---|"]
    rows += [f"| {code.label} | {code.meaning} |" for code in ExitCode]
    return "\n".join(rows) + "\n"


class Interrupted(KeyboardInterrupt):
    """SIGINT, SIGTERM or SIGHUP arrived: the running commands were killed first.

    A KeyboardInterrupt, so it unwinds everything a Ctrl-C does; ``exit_code`` is the
    shell's 128 + signal number (130 for SIGINT, 143 for SIGTERM, 129 for SIGHUP).
    """

    def __init__(self, signum: int, name: str) -> None:
        super().__init__(name)
        self.signum, self.name = signum, name

    @property
    def exit_code(self) -> int:
        """The status a shell gives a process this signal ended."""
        return 128 + self.signum


# How much of a value an error line quotes (README, status 7): a 1 MB value is not echoed.
SHOWN_CHARS = 60


def shown(value: object) -> str:
    """A value as an error line quotes it: its repr, of at most :data:`SHOWN_CHARS` of its
    characters; a longer one cut there, with an ellipsis and its length.

    The quote itself stays short too: characters a repr escapes (``\\x00``) count as
    their escapes, so 60 NULs are not quoted as 240 characters.
    """
    text = value if isinstance(value, str) else repr(value)
    quote = repr if isinstance(value, str) else str
    keep = min(len(text), SHOWN_CHARS)
    while keep and len(quote(text[:keep])) > SHOWN_CHARS + 2:
        keep -= 1
    if keep == len(text):
        return quote(text)
    return f"{quote(text[:keep])}... ({len(text):,} characters)"


class GateError(Exception):
    """Base for every error cuda-gate reports to a person."""

    exit_code: ExitCode = ExitCode.NOT_ACCEPTED

    def __init__(self, message: str, *, hint: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.hint = hint

    def one_line(self) -> str:
        """The message and hint on one line, as the CLI prints it."""
        text = " ".join(self.message.split())
        if self.hint:
            text += f" ({' '.join(self.hint.split())})"
        return text


class NotAcceptedError(GateError):
    """A requirement was checked and not met (such as ``inspect --require-device``)."""

    exit_code = ExitCode.NOT_ACCEPTED


class ToolError(GateError):
    """A required external tool is missing, failed, or printed something unusable."""

    exit_code = ExitCode.TOOL


class ToolTimeoutError(ToolError):
    """A tool or program ran past its timeout; its process group was killed."""


class NoDeviceError(GateError):
    """No CUDA device could be used; carries the runtime's own error text."""

    exit_code = ExitCode.NO_DEVICE


class UnsupportedTargetError(GateError):
    """The detected target is not in the toolkit's list of supported targets."""

    exit_code = ExitCode.TOOL


class EvidenceError(GateError):
    """The evidence folder cannot be written."""

    exit_code = ExitCode.EVIDENCE


class BadInputError(GateError):
    """An input file is malformed: not ELF, truncated, corrupted."""

    exit_code = ExitCode.BAD_INPUT


class ConfigError(GateError):
    """The configuration or a command-line value is invalid."""

    exit_code = ExitCode.CONFIG


class SignatureError(GateError):
    """A signature does not verify, or a key cannot be used."""

    exit_code = ExitCode.BAD_SIGNATURE


class ArtifactChangedError(GateError):
    """An artifact no longer matches the hash recorded in the manifest."""

    exit_code = ExitCode.ARTIFACT_CHANGED


class StaleEnvironmentError(GateError):
    """The machine no longer matches the one the evidence was recorded on."""

    exit_code = ExitCode.STALE_ENVIRONMENT


class EvidenceChangedError(GateError):
    """An evidence file no longer matches its recorded digest."""

    exit_code = ExitCode.EVIDENCE_CHANGED


class StaleEvidenceError(GateError):
    """The evidence is of another revision, or older than the verifier allows."""

    exit_code = ExitCode.STALE_EVIDENCE


class StorageError(GateError):
    """The evidence store could not be reached or refused an operation."""

    exit_code = ExitCode.STORAGE


class StorageConflictError(StorageError):
    """The store already holds different content under a run's id: not an outage, kept aside."""

    exit_code = ExitCode.STORAGE_CONFLICT


class GitHubError(GateError):
    """The GitHub API refused or failed a request."""

    exit_code = ExitCode.GITHUB


def main(argv: list[str]) -> int:
    """``python -m gate.errors --markdown``: print the README's exit-status table."""
    if argv != ["--markdown"]:
        sys.stderr.write("usage: python -m gate.errors --markdown\n")
        return int(ExitCode.USAGE)
    sys.stdout.write(markdown_table())
    return int(ExitCode.OK)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
