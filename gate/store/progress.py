"""A plain-text progress bar for large uploads, on stderr, with no extra dependency.

On a terminal the bar redraws in place; in a CI log it prints one line per
quarter so the log stays short.
"""

from __future__ import annotations

import sys
from typing import TextIO

from gate.store.base import ProgressEvent

_WIDTH = 30
_MIB = 1 << 20


class StderrProgress:
    """Draws a bar for every multipart upload; small files are not worth a bar."""

    def __init__(self, stream: TextIO | None = None) -> None:
        self.stream = stream if stream is not None else sys.stderr
        self._tty = bool(getattr(self.stream, "isatty", lambda: False)())
        self._shown: dict[str, int] = {}

    def __call__(self, event: ProgressEvent) -> None:
        """Show the progress of one object."""
        if not event.multipart or event.total <= 0:
            return
        percent = min(100, event.done * 100 // event.total)
        if self._tty:
            end = "\n" if percent == 100 else ""
            self.stream.write(f"\r{self._line(event, percent)}{end}")
        else:
            step = percent // 25
            if self._shown.get(event.key, -1) >= step:
                return
            self._shown[event.key] = step
            self.stream.write(self._line(event, percent) + "\n")
        self.stream.flush()

    @staticmethod
    def _line(event: ProgressEvent, percent: int) -> str:
        filled = _WIDTH * percent // 100
        bar = "#" * filled + "." * (_WIDTH - filled)
        name = event.key.rsplit("/", 1)[-1]
        return (
            f"upload [{bar}] {percent:3d}% {event.done / _MIB:.1f}/{event.total / _MIB:.1f} MiB "
            f"{name}"
        )
