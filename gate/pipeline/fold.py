"""The pipeline as a fold: each step a function of the outcomes before it, returning a
frozen outcome; the fold records each stage's end, and stops on a failure or at
``--stop-after``, skipping the stages not run with the reason.

Nothing here is assigned after it is built: :class:`Outcomes` grows by returning a new
one, and :func:`fold` yields it after every step, so whoever drives the fold holds
everything found so far even when a step raises.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol, TypeVar

from gate.config import Config
from gate.container.place import Place
from gate.errors import ExitCode, GateError
from gate.evidence import EvidenceDir
from gate.pipeline.options import RunOptions
from gate.pipeline.progress import StageProgress
from gate.record import STAGES
from gate.rules.causes import Cause
from gate.rules.verdict import Check, Stage, StageStatus

# The stages the fold runs; report, manifest and store follow in gate.pipeline.
FOLDED = STAGES[:5]

T = TypeVar("T")


@dataclass(frozen=True)
class Context:
    """What every step reads: the run's options and folders, and where it says so."""

    options: RunOptions
    config: Config
    evidence: EvidenceDir
    workdir: Path
    progress: StageProgress
    place: Place
    before_project: Callable[[], None]  # called before the project's first command


class StageResult(Protocol):
    """What every stage outcome has."""

    @property
    def checks(self) -> tuple[Check, ...]: ...

    @property
    def failure(self) -> GateError | None: ...


@dataclass(frozen=True)
class Ended:
    """A stage's end, as a step returns it: ran (``began``), or skipped (``skipped``)."""

    stage: str
    result: StageResult
    began: float | None = None
    cause: Cause = Cause.TOOLCHAIN
    exit_code: ExitCode | None = None  # a skip's: this one's, or the rest's after a failure
    skipped: str = ""  # why the stage did not run (then ``began`` is None)


@dataclass(frozen=True)
class NotRun:
    """A stage skipped for a reason of its own, with the checks that say what did not run."""

    checks: tuple[Check, ...]
    failure: GateError | None = None


@dataclass(frozen=True)
class Outcomes:
    """The steps' outcomes so far, each with its stage, and each ended stage's place in
    the checks (where its later checks go)."""

    steps: tuple[tuple[str, object], ...] = ()
    ended: tuple[tuple[str, int | None], ...] = ()

    def get(self, kind: type[T]) -> T | None:
        """The latest outcome of type ``kind``, else None."""
        found = [outcome for _, outcome in self.steps if isinstance(outcome, kind)]
        return found[-1] if found else None

    def of(self, kind: type[T]) -> T:
        """The outcome of type ``kind`` that an earlier step's success guarantees."""
        found = self.get(kind)
        assert found is not None, kind  # noqa: S101 - the fold ran that step
        return found

    def result(self, stage: str, kind: type[T]) -> T | None:
        """The stage's own outcome when it ended (at whichever step) with one of ``kind``."""
        for _, outcome in self.steps:
            if isinstance(outcome, Ended) and outcome.stage == stage:
                return outcome.result if isinstance(outcome.result, kind) else None
        return None

    def checks_end(self, stage: str) -> int | None:
        """How many checks there were once the stage was recorded."""
        return dict(self.ended).get(stage)

    def over(self, stage: str) -> bool:
        """Whether the stage has ended."""
        return any(name == stage for name, _ in self.ended)

    def remaining(self) -> list[str]:
        """The folded stages not ended yet, in order."""
        return [name for name in FOLDED if not self.over(name)]

    def add(self, stage: str, outcome: object) -> Outcomes:
        return Outcomes((*self.steps, (stage, outcome)), self.ended)

    def end(self, stage: str, checks_end: int | None) -> Outcomes:
        kept = tuple((n, at) for n, at in self.ended if n != stage)
        return Outcomes(self.steps, (*kept, (stage, checks_end)))


Step = Callable[[Context, Outcomes], object]


def fold(ctx: Context, steps: Sequence[tuple[str, Step]]) -> Iterator[Outcomes]:
    """Run ``steps`` (each with the stage it belongs to) in order, yielding the outcomes
    after each (and once more after a stage is recorded). A stage ends at its first step
    that returns :class:`Ended` (its later steps do not run); a failed stage, or the one
    ``--stop-after`` names, skips the rest."""
    done = Outcomes()
    for stage, step in steps:
        if done.over(stage):
            continue
        outcome = step(ctx, done)
        done = done.add(stage, outcome)
        if not isinstance(outcome, Ended):
            yield done
            continue
        done = done.end(outcome.stage, None)  # over, whatever its recording raises
        yield done
        done = done.end(outcome.stage, record(ctx, outcome))
        yield done
        stopped = ctx.options.stop_after == outcome.stage
        if outcome.result.failure is not None or stopped:
            skip_rest(ctx, done.remaining(), outcome.stage, outcome.exit_code)
            return


def record(ctx: Context, ended: Ended) -> int:
    """Record one stage's end (its line, checks and commands); the checks then."""
    p = ctx.progress
    outcome = ended.result
    if ended.began is None:
        p.checks += outcome.checks
        p.skip(ended.stage, ended.skipped, ended.exit_code)
        return len(p.checks)
    p.commands += getattr(outcome, "commands", ())
    p.checks += outcome.checks
    ctx.evidence.write_text("commands.txt", "".join(f"{r.command_line()}\n" for r in p.commands))
    p.done(ended.stage, ended.began, outcome.failure)
    if outcome.failure is not None:
        p.failed_check(ended.stage, outcome.failure, ended.cause)
    return len(p.checks)


def skip_rest(
    ctx: Context, remaining: Sequence[str], stage: str, exit_code: ExitCode | None = None
) -> None:
    """Every stage not run yet, skipped with the reason; the runs too, in JUnit."""
    p = ctx.progress
    reason = (
        f"stopped after the {stage} stage (--stop-after)"
        if ctx.options.stop_after == stage
        else f"the {stage} stage failed"
    )
    if "execute" in remaining:
        from gate.stages import execute  # noqa: PLC0415 - preloaded (gate.guard.selfcheck)

        names = execute.entry_names(ctx.config)
        p.checks += execute.skipped_checks(names, f"not run: {reason}")
    for name in remaining:
        p.skip(name, reason, exit_code)


def internal(p: StageProgress, remaining: Sequence[str], error: GateError) -> None:
    """A stage raised instead of returning its failure: record it, skip the rest."""
    if remaining:
        name = remaining[0]
        p.stages.append(
            Stage(name, StageStatus.FAILED, error.one_line(), 0.0, int(error.exit_code))
        )
        p.failed_check(name, error, Cause.INTERNAL)
        p.say(f"{name} stopped: {error.one_line()}")
    failed = p.stages[-1].name if p.stages else "first"
    for name in remaining[1:]:
        p.skip(name, f"the {failed} stage failed")
