"""A command's output files read while they grow, for a log a person watches (``tail -f``).

gate.proc sends a command's output to files (never pipes); :class:`Pump` reads what was
added since its last call and hands it on, each stream's lines whole and bounded.
"""

from __future__ import annotations

import codecs
import os
from collections.abc import Callable, Sequence


class Pump:
    """What a command wrote to its output files so far, handed to a sink as it comes.

    Whole lines only (a line of stdout and one of stderr never mix), but a line longer
    than :data:`_PUMP_LINE` (a progress bar redrawn with carriage returns) goes as it is;
    each stream up to ``limit`` bytes, then one note saying the rest comes at the end.
    """

    def __init__(self, sink: Callable[[str], None], fds: Sequence[int], limit: int) -> None:
        self.sink, self.limit = sink, limit
        self.streams = [_Stream(fd) for fd in fds]

    def pump(self, *, final: bool = False) -> None:
        """Hand the sink what was written since the last call (all of it when ``final``)."""
        for stream in self.streams:
            text = stream.take(self.limit, final=final)
            if text:
                self.sink(text)


_PUMP_LINE = 8192
_PUMP_CHUNK = 1 << 20


class _Stream:
    def __init__(self, fd: int) -> None:
        self.fd, self.position, self.partial, self.noted = fd, 0, "", False
        self.decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")

    def take(self, limit: int, *, final: bool) -> str:
        """What was written since the last call, up to ``limit`` bytes in all."""
        pieces: list[str] = []
        while not self.noted:
            try:
                size = os.fstat(self.fd).st_size
                end = min(size, limit)
                data = os.pread(self.fd, min(end - self.position, _PUMP_CHUNK), self.position)
            except (OSError, ValueError):
                break
            self.position += len(data)
            caught_up = self.position >= end or not data
            last = caught_up and (final or size > limit)  # nothing more will be shown
            text = self.partial + self.decoder.decode(data, final=last)
            cut = len(text) if last else text.rfind("\n") + 1
            if cut == 0 and len(text) > _PUMP_LINE:
                cut = len(text)
            self.partial = text[cut:]
            pieces.append(text[:cut])
            if last and size > limit:
                self.noted = True
                sep = "" if not text or text.endswith("\n") else "\n"
                pieces.append(
                    f"{sep}[cuda-gate: output past {limit} bytes is not shown while the "
                    "command runs; the log is completed when it ends]\n"
                )
            if caught_up:
                break
        return "".join(pieces)
