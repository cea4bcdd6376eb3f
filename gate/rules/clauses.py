"""Each path's clause: what one run, or one path's module loads, says, from its own record.

A headline or a diagnosis that speaks of both execution paths says each path from that
path's own record: its outcome and its error code, never the other path's (issue 42: a
module refused natively and loaded by forced JIT was said refused "in app [native], app
[jit]"; a PTX too new for the driver quoted the native path's 223 for both paths).

1. :func:`path_clause`: one path's run in a diagnosis (gate.rules.prediction.Diagnosis),
   worded from that run: a run that passed is said to pass, whatever the pair's kind.
2. :func:`loads_on`: the module loads one path made, and how the driver answered them.
3. :func:`refusal`: a refused load said with its error name and number.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from gate.rules.causes import ExecPath
from gate.rules.prediction import Diagnosis
from gate.rules.verdict import CheckState, Clause


@dataclass(frozen=True)
class PathRun:
    """One path's run as a diagnosis says it: where its record is, how it ended, why.

    ``reason`` is the run's own phrase (gate.rules.causes.RunFacts.reason); ``error`` the
    CUDA error code it failed with (None: passed, timed out, or no known error); ``basis``
    what inspection predicted for the path.
    """

    source: str
    path: ExecPath
    passed: bool
    reason: str
    error: int | None = None
    basis: str = ""


def path_clause(kind: Diagnosis, run: PathRun) -> Clause:
    """``run``'s clause in a diagnosis of ``kind`` (step 1)."""
    native = run.path is ExecPath.NATIVE
    if run.passed:
        text = "native passes" if native else "PTX JIT passes"
        return Clause(text, run.source, run.path, CheckState.PASSED)
    if kind is Diagnosis.BOTH_FOR_WANT_OF_CODE:
        text = f"{'native' if native else 'forced JIT'}: {run.basis} ({run.reason})"
    elif kind is Diagnosis.BOTH_FAIL:
        text = f"{'native' if native else 'JIT'}: {run.reason}"
    elif kind is Diagnosis.JIT_BLOCKED and not native:
        text = f"whole-program forced JIT cannot run because {run.basis} (the run: {run.reason})"
    else:
        text = f"{'native' if native else 'PTX JIT'} fails ({run.reason})"
    return Clause(text, run.source, run.path, CheckState.FAILED, run.error)


@dataclass(frozen=True)
class Load:
    """One module load of one run: the run (``entry [path]``), its path, and the driver's
    answer (``error`` None: loaded; else the CUresult and its name)."""

    run: str
    path: ExecPath
    error: int | None = None
    name: str = ""

    @property
    def refused(self) -> bool:
        """The driver refused the module."""
        return self.error is not None


def loads_on(loads: Sequence[Load], path: ExecPath) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """The runs of ``path`` that loaded the module, and the refusals among them, each said
    once (step 2): ``(("app [native]",), ("CUDA_ERROR_... (error 223) in app [native]",))``."""
    mine = [load for load in loads if load.path is path]
    runs = tuple(dict.fromkeys(load.run for load in mine))
    said = (f"{refusal(load.name, load.error)} in {load.run}" for load in mine if load.error)
    return runs, tuple(dict.fromkeys(said))


def refusal(name: str, error: int) -> str:
    """``CUDA_ERROR_UNSUPPORTED_PTX_VERSION (error 222)``: a refused load (step 3)."""
    return f"{name} (error {error})" if name else f"error {error}"
