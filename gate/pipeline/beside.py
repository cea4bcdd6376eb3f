"""What runs beside the stages, and the one place that holds the handles to it.

- The launch recorder (gate.launch.recorder.PendingBuild) compiles beside the build and
  inspect stages; the execute stage waits for it (:meth:`Beside.recorder_ready`), and so
  do the smoke program's runs started ahead, which run under it.
- The smoke program's two runs (gate.stages.execute.SmokeAhead) start beside the
  project's build, from the build's thread as soon as the smoke program is built
  (:meth:`Beside.smoke_starter`); the execute stage takes them once
  (:meth:`Beside.take_smoke_ahead`), and a run that never gets there discards them
  (:func:`settle`).
- The full SASS dumps (gate.stages.sassdump.Deferred, left running by the inspect
  stage) run beside the execute stage; :func:`settle` joins them on every path, their
  checks put among the inspect stage's, before the report.

Elsewhere, and not handles of the pipeline's: the gate's own modules are imported beside
the first stages (gate.guard.selfcheck), heartbeats of long commands are said beside
them (gate.proc.heartbeats), and the execute stage reads the libraries a run loaded
while the next entry point runs (gate.stages.libraries.Prefetch, inside that stage).
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from gate.evidence import EvidenceDir
from gate.launch.recorder import PendingBuild, Recorder
from gate.rules.verdict import Check

if TYPE_CHECKING:
    from gate.stages import execute
    from gate.stages.sassdump import Deferred


class HandOver:
    """The smoke program's runs, put by the build's thread, taken once."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._held: list[execute.SmokeAhead] = []

    def put(self, ahead: execute.SmokeAhead) -> None:
        with self._lock:
            self._held.append(ahead)

    def take(self) -> execute.SmokeAhead | None:
        """The runs, once; None when none were started or they were taken already."""
        with self._lock:
            return self._held.pop() if self._held else None


@dataclass(frozen=True)
class Beside:
    """The work started beside the stages: the launch recorder's build, if wanted, and
    the slot the smoke program's runs are handed over in."""

    recorder: PendingBuild | None = None
    ahead: HandOver = field(default_factory=HandOver)

    @classmethod
    def start(cls, nvcc: str, workdir: Path, *, record: bool, use_cache: bool) -> Beside:
        """The launch recorder compiling (when ``record``) while the project builds."""
        pending = PendingBuild(nvcc, workdir, use_cache=use_cache) if record else None
        return cls(pending)

    def recorder_ready(self) -> Recorder | None:
        """The launch recorder, waiting for its build (None when not wanted)."""
        return self.recorder.result() if self.recorder is not None else None

    def smoke_starter(self, evidence: EvidenceDir, timeout: float) -> Callable[[Path], None]:
        """What starts the smoke program's runs, under the recorder, once it is built."""
        from gate.stages import execute  # noqa: PLC0415 - preloaded (gate.guard.selfcheck)

        pending = self.recorder

        def start(smoke: Path) -> None:
            self.ahead.put(
                execute.SmokeAhead(
                    execute.smoke_entry(smoke, timeout),
                    evidence,
                    pending.result if pending is not None else lambda: None,
                )
            )

        return start

    def take_smoke_ahead(self) -> execute.SmokeAhead | None:
        """The smoke program's runs started beside the build, handed over once."""
        return self.ahead.take()


def discard_unclaimed(beside: Beside | None) -> None:
    """Runs started ahead that the execute stage never took: waited for, files removed."""
    ahead = beside.take_smoke_ahead() if beside is not None else None
    if ahead is not None:
        ahead.discard()


def join_dumps(deferred: Deferred | None, checks: list[Check], at: int | None) -> None:
    """The SASS dumps waited for; their checks among the inspect stage's, at ``at``
    (where a reader of the table looks for them). Never raises: failures are checks."""
    if deferred is not None:
        where = len(checks) if at is None else at
        checks[where:where] = deferred.finish()
