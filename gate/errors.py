"""One exception base for cuda-gate; each subclass carries its exit code.

Only the CLI turns these into an exit status and a one-line message; everything
else raises them, always `from` the underlying cause.
"""

from __future__ import annotations

from enum import IntEnum


class ExitCode(IntEnum):
    """Process exit statuses, stable for scripts and CI."""

    OK = 0
    NOT_ACCEPTED = 1
    USAGE = 2
    TOOL = 3
    NO_DEVICE = 4
    EVIDENCE = 5
    BAD_INPUT = 6
    CONFIG = 7
    BAD_SIGNATURE = 10
    ARTIFACT_CHANGED = 11
    STALE_ENVIRONMENT = 12
    EVIDENCE_CHANGED = 13
    STALE_EVIDENCE = 14
    STORAGE = 20
    GITHUB = 21
    STORAGE_CONFLICT = 22
    INTERRUPTED = 130


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
