"""The stages as they go: a line as each stage ends, heartbeats of long commands, and
the stages, commands and checks gathered for the run record."""

from __future__ import annotations

import shlex
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from gate import proc
from gate.errors import ExitCode, GateError
from gate.record import STAGES
from gate.render.live import LiveLine, heartbeat_setting
from gate.rules.causes import Cause
from gate.rules.verdict import Check, CheckState, Stage, StageStatus

Progress = Callable[[str], None]
# A long command's heartbeat: every 10 s on a terminal, every 30 s (proc's) in a log.
_BEAT_TERMINAL = 10.0
_SHOWN_COMMAND = 80
_LIVE_COMMAND = 32


@dataclass
class StageProgress:
    """The stages so far (name, status, detail, duration), for the record and the console."""

    say: Progress
    live: LiveLine | None = None  # on a terminal: the running command, in place
    stages: list[Stage] = field(default_factory=list)
    commands: list[proc.Result] = field(default_factory=list)
    checks: list[Check] = field(default_factory=list)
    current: str = ""

    def start(self, name: str) -> float:
        """A stage begins: on a terminal the live line says so until its end line; a log
        gets the end line only (a long command there has its heartbeats)."""
        self.current = name
        if self.live is not None:
            self.live.show(f"[{STAGES.index(name) + 1}/{len(STAGES)}] {name} ...")
        return time.monotonic()

    def beat(self, elapsed: float, argv: tuple[str, ...], last: str) -> None:
        """A long command's heartbeat line (in a log)."""
        self.say(self.running(elapsed, argv, last))

    def show(self, elapsed: float, argv: tuple[str, ...], last: str) -> None:
        """A running command on the live line (on a terminal): the stage and the time
        first, the last output line before the command's tail, for a narrow terminal."""
        if self.live is not None:
            command = shown(argv, _LIVE_COMMAND)
            said = f": {last}" if last else ""
            self.live.show(f"{self.where()} {clock(elapsed)} {command}{said}")

    def running(self, elapsed: float, argv: tuple[str, ...], last: str) -> str:
        """The stage, the command, how long it has run, its last output line."""
        said = f": {last}" if last else ""
        return f"{self.where()}: {shown(argv, _SHOWN_COMMAND)} running {clock(elapsed)}{said}"

    def where(self) -> str:
        """``[3/8] build``: the stage now running."""
        name = self.current or "run"
        return f"[{STAGES.index(name) + 1}/{len(STAGES)}] {name}" if name in STAGES else name

    def done(
        self, name: str, began: float, failure: GateError | None = None, detail: str = ""
    ) -> None:
        took = time.monotonic() - began
        index = f"[{STAGES.index(name) + 1}/{len(STAGES)}]"
        if failure is None:
            self.stages.append(Stage(name, StageStatus.RAN, detail, took))
            self.say(f"{index} {name} done ({took:.1f} s)" + (f": {detail}" if detail else ""))
            return
        self.stages.append(
            Stage(name, StageStatus.FAILED, failure.one_line(), took, int(failure.exit_code))
        )
        # The whole reason is in the table and the verdict: the progress line says what.
        self.say(f"{index} {name} stopped: {failure.message.split(' (')[0]}")

    def skip(self, name: str, reason: str, exit_code: ExitCode | None = None) -> None:
        self.stages.append(
            Stage(name, StageStatus.SKIPPED, reason, 0.0, int(exit_code) if exit_code else None)
        )
        self.say(f"[{STAGES.index(name) + 1}/{len(STAGES)}] {name} skipped: {reason}")

    def failed_check(self, stage: str, failure: GateError, cause: Cause) -> None:
        """A stage failure no check of the stage already shows becomes one."""
        if not any(c.failed and c.classname.startswith(f"gate.{stage}") for c in self.checks):
            self.checks.append(
                Check(
                    f"{stage} stage",
                    f"gate.{stage}",
                    CheckState.FAILED,
                    failure.one_line(),
                    cause=cause,
                )
            )


def shown(argv: tuple[str, ...], room: int) -> str:
    command = shlex.join(argv)
    return command if len(command) <= room else command[: room - 3] + "..."


def clock(elapsed: float) -> str:
    minutes, seconds = divmod(int(elapsed), 60)
    return f"{minutes}m{seconds:02d}s"


def beat_interval() -> float:
    """Seconds between heartbeats: ``CUDA_GATE_HEARTBEAT`` when it is a positive number,
    else 10 on a terminal and 30 in a log."""
    chosen = heartbeat_setting()
    if chosen is not None:
        return chosen
    return _BEAT_TERMINAL if sys.stderr.isatty() else proc.HEARTBEAT_EVERY
