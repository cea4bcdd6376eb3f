"""The full SASS dumps, left running beside the execute stage and checked at the end.

``cuobjdump --dump-sass`` is the slowest of cuobjdump's calls by far (a second of
nvdisasm for an 11 MB torch extension) and only fills ``sass.txt``, whose one check is
"SASS dump holds SASS" (gate.stages.artifactchecks).
"""

from __future__ import annotations

from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor

from gate import proc
from gate.errors import GateError, ToolError
from gate.evidence import EvidenceDir
from gate.rules.causes import Cause
from gate.rules.verdict import Check, CheckState
from gate.stages.artifactchecks import SASS_HOLDS, holds_checks
from gate.system import machine

# A dump under way: its future, the evidence, the artifact's name and prefix, checked?
_Dump = tuple[Future[proc.Result | ToolError], EvidenceDir, str, str, bool]


class Deferred:
    """Evidence that only one check reads, still being written: the full SASS dumps.

    They run on while the execute stage does, and :meth:`finish` (called by the pipeline
    before the report, whatever happened in between) waits for them, writes the files and
    gives that check.
    """

    def __init__(self) -> None:
        self._pool: ThreadPoolExecutor | None = None
        self._pending: list[_Dump] = []

    def submit(
        self,
        work: Callable[[], proc.Result | ToolError],
        evidence: EvidenceDir,
        name: str,
        prefix: str,
        *,
        checked: bool,
    ) -> None:
        """Start ``work``; its output becomes artifact ``name``'s ``{prefix}sass.txt``,
        checked for SASS when ``checked`` (an artifact with device code of its own)."""
        if self._pool is None:
            # nvdisasm is one core per dump: leave most of the machine to the project.
            workers = machine.background_threads()
            self._pool = ThreadPoolExecutor(workers, thread_name_prefix="sass-dump")
        self._pending.append((self._pool.submit(work), evidence, name, prefix, checked))

    def finish(self) -> list[Check]:
        """Wait for every dump, write it (or why it is absent), and check what it holds.

        Never raises: a dump that cannot be written is a failed check naming why, and the
        other dumps are still written.
        """
        pending, self._pending = self._pending, []
        checks: list[Check] = []
        try:
            for future, evidence, name, prefix, checked in pending:
                try:
                    write_sass(evidence, prefix, future.result())
                    if checked:
                        checks += holds_checks(evidence, name, prefix, SASS_HOLDS)
                except GateError as e:
                    checks.append(_dump_failed(name, e.one_line()))
                except Exception as e:  # noqa: BLE001  (a bug must still leave a report)
                    checks.append(_dump_failed(name, f"internal error: {type(e).__name__}: {e}"))
        finally:
            if self._pool is not None:
                self._pool.shutdown(cancel_futures=True)
                self._pool = None
        return checks


def _dump_failed(name: str, why: str) -> Check:
    return Check(f"{name}: SASS dump", "gate.inspect", CheckState.FAILED, why, cause=Cause.EVIDENCE)


def write_sass(evidence: EvidenceDir, prefix: str, dumped: proc.Result | ToolError) -> None:
    """A SASS dump's ``{prefix}sass.txt``, or ``sass-not-dumped.txt`` saying why there is none."""
    if isinstance(dumped, ToolError):
        # The listings do not need nvdisasm; a full dump does. Say why it is absent.
        evidence.write_text(f"{prefix}sass-not-dumped.txt", dumped.one_line() + "\n")
    else:
        evidence.write_text(f"{prefix}sass.txt", dumped.stdout)
