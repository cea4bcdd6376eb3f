"""A numbered verification step and how it ended: what ``verify`` prints, one line each."""

from __future__ import annotations

import enum
from collections.abc import Sequence
from dataclasses import dataclass

from gate.errors import GateError


class Outcome(enum.Enum):
    """How one step ended."""

    PASSED = "ok"
    FAILED = "FAILED"
    NOT_CHECKED = "not checked"


@dataclass(frozen=True)
class StepResult:
    """One numbered step, its outcome and a one-line detail."""

    number: int
    title: str
    outcome: Outcome
    detail: str
    error: GateError | None = None

    def line(self) -> str:
        """The step as the CLI prints it."""
        return f"  {self.number}. {self.title}: {self.outcome.value} - {self.detail}"


def failed(number: int, title: str, problems: Sequence[str], error: type[GateError]) -> StepResult:
    """A failed step: every problem in the detail, the first one (and a count) in the error."""
    more = f" (and {len(problems) - 1} more)" if len(problems) > 1 else ""
    reason = f"{number}. {title}: {problems[0]}{more}"
    return StepResult(number, title, Outcome.FAILED, "; ".join(problems), error(reason))
