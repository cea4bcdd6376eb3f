"""Why a check or a run failed: the ranked causes, the CUDA runtime's errors, a run's outcome.

* :class:`Cause`: every reason a check can fail, most fundamental first (a missing
  target explains a failed run, not the other way round), each tied to the execution
  path it stands against where it stands against one (:func:`path_of`);
* :class:`RuntimeFailure`: the CUDA runtime errors worth telling apart, recognised by
  the runtime's own text (:func:`classify`);
* :class:`RunFacts`: one run of an entry point as recorded, and the one rule for
  whether it passed, why not (:meth:`RunFacts.cause`) and how to say so
  (:meth:`RunFacts.reason`): the execute stage, the run record, the release matrix
  and the reports all ask it.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass


class ExecPath(enum.Enum):
    """The two execution paths the gate proves separately."""

    NATIVE = "native"
    JIT = "jit"

    @property
    def log_name(self) -> str:
        """The seed's log file name for this path."""
        return "native.log" if self is ExecPath.NATIVE else "ptx-jit.log"

    @property
    def title(self) -> str:
        """Human name of the path."""
        return "native SASS (PTX JIT disabled)" if self is ExecPath.NATIVE else "forced PTX JIT"


class Cause(enum.Enum):
    """Why a check failed, most fundamental first: the verdict's headline is the first one.

    The order is the ranking; the value is the JUnit failure ``type``.
    """

    HOST_ARCH = "wrong-host-arch"
    TOOLCHAIN = "toolchain"
    STALE_ARTIFACT = "stale-artifact"
    WRONG_TARGET = "wrong-target"
    MISSING_SASS = "missing-sass"
    MISSING_PTX = "missing-ptx"
    MISSING_KERNEL = "missing-kernel"
    NO_DEVICE_CODE = "no-device-code"
    TRAP_STUB = "trap-stub"
    LOADED_LIBRARY = "loaded-library"
    PTX_NEEDS_DRIVER = "ptx-needs-newer-driver"
    DRIVER_TOO_OLD = "driver-too-old"
    NO_KERNEL_IMAGE = "no-kernel-image"
    JIT_DISABLED = "jit-disabled"
    UNSUPPORTED_PTX = "unsupported-ptx"
    INVALID_PTX = "invalid-ptx"
    TIMEOUT = "timeout"
    EXIT_STATUS = "exit-status"
    OUTPUT = "unexpected-output"
    JIT_CACHE = "jit-cache-written"
    PTX_LOAD = "ptx-load-failed"
    PREDICTION = "prediction-mismatch"
    CROSS_CHECK = "cross-check"
    EVIDENCE = "evidence-incomplete"
    INTERNAL = "internal-error"


_RANK = {cause: i for i, cause in enumerate(Cause)}
# The path a cause stands against, where it stands against one path only.
_PATH: dict[Cause | None, ExecPath] = {
    Cause.MISSING_SASS: ExecPath.NATIVE,
    Cause.JIT_DISABLED: ExecPath.NATIVE,
    Cause.MISSING_PTX: ExecPath.JIT,
    Cause.PTX_NEEDS_DRIVER: ExecPath.JIT,
    Cause.UNSUPPORTED_PTX: ExecPath.JIT,
    Cause.INVALID_PTX: ExecPath.JIT,
    Cause.PTX_LOAD: ExecPath.JIT,
}


def rank(cause: Cause | None) -> int:
    """Position in the ranking: lower explains more; no cause ranks last."""
    return _RANK[cause] if cause is not None else len(_RANK)


def path_of(cause: Cause | None) -> ExecPath | None:
    """The execution path ``cause`` stands against, or None (both, or neither)."""
    return _PATH.get(cause)


class RuntimeFailure(enum.Enum):
    """CUDA runtime errors worth telling apart, matched on the runtime's own text."""

    NO_KERNEL_IMAGE = (209, "no kernel image is available for execution on the device")
    JIT_DISABLED = (223, "PTX JIT compilation was disabled")
    UNSUPPORTED_PTX = (222, "the provided PTX was compiled with an unsupported toolchain")
    INVALID_PTX = (218, "a PTX JIT compilation failed")
    JIT_NOT_FOUND = (221, "PTX JIT compiler library not found")
    NO_DEVICE = (100, "no CUDA-capable device is detected")
    DRIVER_TOO_OLD = (35, "CUDA driver version is insufficient for CUDA runtime version")
    # What a kernel that hits a trap (a trap stub, __trap()) leaves behind.
    LAUNCH_FAILED = (719, "unspecified launch failure")
    ILLEGAL_INSTRUCTION = (715, "an illegal instruction was encountered")

    @property
    def code(self) -> int:
        """The cudaError_t value."""
        return int(self.value[0])

    @property
    def text(self) -> str:
        """The runtime's message."""
        return str(self.value[1])

    def cause(self) -> Cause:
        """The ranked cause this failure stands for."""
        return _FAILURE_CAUSES[self]

    def is_trap(self) -> bool:
        """The kernel died on the device: what a trap stub's launch gives."""
        return self in _TRAPS

    def is_code_failure(self) -> bool:
        """The device had no usable code for a kernel (what inspection predicts)."""
        return self in _CODE_FAILURES

    @classmethod
    def from_text(cls, text: str | None) -> RuntimeFailure | None:
        """The failure whose message is ``text`` (as the run record stores it), or None."""
        return next((f for f in cls if f.text == text), None)


_FAILURE_CAUSES = {
    RuntimeFailure.NO_KERNEL_IMAGE: Cause.NO_KERNEL_IMAGE,
    RuntimeFailure.JIT_DISABLED: Cause.JIT_DISABLED,
    RuntimeFailure.UNSUPPORTED_PTX: Cause.UNSUPPORTED_PTX,
    RuntimeFailure.INVALID_PTX: Cause.INVALID_PTX,
    RuntimeFailure.JIT_NOT_FOUND: Cause.INVALID_PTX,
    RuntimeFailure.NO_DEVICE: Cause.EXIT_STATUS,
    RuntimeFailure.DRIVER_TOO_OLD: Cause.DRIVER_TOO_OLD,
    RuntimeFailure.LAUNCH_FAILED: Cause.EXIT_STATUS,
    RuntimeFailure.ILLEGAL_INSTRUCTION: Cause.EXIT_STATUS,
}
_TRAPS = frozenset({RuntimeFailure.LAUNCH_FAILED, RuntimeFailure.ILLEGAL_INSTRUCTION})
_CODE_FAILURES = frozenset(
    {
        RuntimeFailure.NO_KERNEL_IMAGE,
        RuntimeFailure.JIT_DISABLED,
        RuntimeFailure.UNSUPPORTED_PTX,
        RuntimeFailure.INVALID_PTX,
    }
)


def classify(log: str) -> RuntimeFailure | None:
    """The first known runtime failure whose message appears in ``log`` (any case)."""
    lowered = log.lower()
    return next((f for f in RuntimeFailure if f.text.lower() in lowered), None)


@dataclass(frozen=True)
class RunFacts:
    """One run of an entry point as recorded: what it did and what a good run looks like."""

    returncode: int | None  # None when it was killed
    timed_out: bool
    expected_returncode: int
    output_ok: bool
    cache_clean: bool
    failure: RuntimeFailure | None = None

    def passed(self) -> bool:
        """Not killed, the expected exit status and output, and no JIT cache left behind."""
        return (
            not self.timed_out
            and self.returncode == self.expected_returncode
            and self.output_ok
            and self.cache_clean
        )

    def cause(self) -> Cause | None:
        """The ranked cause of a failed run (None for a passed one)."""
        if self.passed():
            return None
        if self.timed_out:
            return Cause.TIMEOUT
        if self.failure is not None:
            return self.failure.cause()
        if self.returncode != self.expected_returncode:
            return Cause.EXIT_STATUS
        return Cause.OUTPUT if not self.output_ok else Cause.JIT_CACHE

    def reason(
        self,
        *,
        timeout: float | None = None,
        error_line: str = "",
        expected_output: str | None = None,
    ) -> str:
        """Why it failed (or ``passed``), in one phrase; the details where the caller has them:
        ``error_line`` is the run's line that says what went wrong (proc.Result.error_line)."""
        cause = self.cause()
        if cause is None:
            return "passed"
        if cause is Cause.TIMEOUT:
            return f"killed after {timeout:g} s" if timeout else "killed (timed out)"
        if self.failure is not None:
            # The program's own line ("RuntimeError: CUDA error: ...") says where it came from.
            said = error_line if self.failure.text.lower() in error_line.lower() else ""
            return f"{said or self.failure.text} (error {self.failure.code})"
        if cause is Cause.EXIT_STATUS:
            expected = f" (expected {self.expected_returncode})" if self.expected_returncode else ""
            return f"exit status {self.returncode}{expected}" + (
                f": {error_line}" if error_line else ""
            )
        if cause is Cause.OUTPUT:
            return (
                f"expected output /{expected_output}/ not found"
                if expected_output
                else "the expected output was not found"
            )
        return "the run left files in its JIT cache folder"
