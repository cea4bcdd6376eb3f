"""A live status line on a terminal: what runs now, rewritten in place, never in files.

On a terminal (stderr is a TTY and ``TERM`` is not ``dumb``) one line says what runs,
for how long, and the last thing it printed; it is redrawn in place (carriage return,
clear to the end of the line), cut to the terminal's width (``COLUMNS`` when set) so
it never wraps, and cleared before any other line is printed and when the command
ends. Written to a file or a CI log it is never drawn: there, the heartbeat lines and
:class:`Counter`'s occasional lines say the same, one line at a time. It is never
coloured, so ``NO_COLOR`` has nothing to turn off.
"""

from __future__ import annotations

import os
import re
import sys
import time
import unicodedata
from collections.abc import Callable, Mapping
from typing import TextIO

# How often the line is redrawn while a command runs.
REDRAW_EVERY = 0.5
# A count on the live line waits this long (a short read shows nothing), then redraws
# at most this often.
_COUNT_DELAY = 0.5
_COUNT_REDRAW = 0.1
# In a log: the first count line after this long, then one per interval.
COUNT_EVERY = 10.0
CLEAR = "\r\033[K"
_FALLBACK_COLUMNS = 80
# What a program prints that would move the cursor or change colours: never redrawn.
_ESCAPE = re.compile(r"\x1b\[[0-?]*[ -/]*[@-~]|\x1b\][^\x07\x1b]*(?:\x07|\x1b\\)?|\x1b.?")
_CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f]")


def heartbeat_setting(environ: Mapping[str, str] | None = None) -> float | None:
    """``CUDA_GATE_HEARTBEAT``: the seconds between progress lines in a log, when it is a
    positive number."""
    env = os.environ if environ is None else environ
    try:
        chosen = float(env.get("CUDA_GATE_HEARTBEAT", ""))
    except ValueError:
        return None
    return chosen if 0 < chosen < float("inf") else None


def is_live(stream: TextIO, environ: Mapping[str, str] | None = None) -> bool:
    """Whether a live line may be drawn on ``stream``: a terminal, and not a dumb one."""
    env = os.environ if environ is None else environ
    try:
        tty = stream.isatty()
    except (AttributeError, ValueError, OSError):
        return False
    return tty and env.get("TERM") != "dumb"


def columns(stream: TextIO, environ: Mapping[str, str] | None = None) -> int:
    """``COLUMNS`` when set, else the width of the terminal ``stream`` is, else 80."""
    env = os.environ if environ is None else environ
    given = env.get("COLUMNS", "").strip()
    if given.isdigit() and int(given) > 0:
        return min(int(given), 1000)
    try:
        return os.get_terminal_size(stream.fileno()).columns or _FALLBACK_COLUMNS
    except (AttributeError, ValueError, OSError):
        return _FALLBACK_COLUMNS


def _cells(char: str) -> int:
    """Terminal columns one character takes: 2 for wide ones, 0 for combining marks."""
    if unicodedata.combining(char):
        return 0
    return 2 if unicodedata.east_asian_width(char) in ("W", "F") else 1


def fit(text: str, width: int) -> str:
    """``text`` as one plain line that fits in ``width`` columns less one (a line that
    fills the last column makes some terminals wrap): escapes and control characters
    gone, the end cut with ``...`` when too long."""
    plain = _CONTROL.sub(" ", _ESCAPE.sub("", text)).strip()
    room = max(1, width - 1)
    if sum(_cells(c) for c in plain) <= room:
        return plain
    dots = "..." if room > 3 else ""
    kept, used = [], 0
    for char in plain:
        used += _cells(char)
        if used > room - len(dots):
            break
        kept.append(char)
    return "".join(kept) + dots


class LiveLine:
    """The one live line of a terminal; does nothing where ``stream`` is no terminal."""

    def __init__(
        self, stream: TextIO | None = None, environ: Mapping[str, str] | None = None
    ) -> None:
        self.stream = sys.stderr if stream is None else stream
        self.environ = environ
        self.enabled = is_live(self.stream, environ)
        self.shown = False

    def show(self, text: str) -> None:
        """Draw ``text`` in place of what the line said."""
        if self.enabled:
            self._write(CLEAR + fit(text, columns(self.stream, self.environ)))
            self.shown = True

    def clear(self) -> None:
        """Remove the line (before another line is printed, or when the command ends)."""
        if self.shown:
            self.shown = False
            self._write(CLEAR)

    def _write(self, text: str) -> None:
        try:
            self.stream.write(text)
            self.stream.flush()
        except (OSError, ValueError):  # the terminal went away: nothing more to draw
            self.enabled = self.shown = False


class Counter:
    """``inspect: 120/15970 files (name)`` while a long read goes on.

    On a terminal the live line, from half a second on; elsewhere one line through
    ``say`` every ``every`` seconds (default ``CUDA_GATE_HEARTBEAT``, else 10), the first
    after ``every``: a short read shows nothing.
    """

    def __init__(
        self,
        what: str,
        *,
        say: Callable[[str], None],
        live: LiveLine | None = None,
        every: float | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        every = every if every is not None else heartbeat_setting() or COUNT_EVERY
        self.what, self.say, self.every, self.clock = what, say, every, clock
        self.live = live if live is not None and live.enabled else None
        start = clock()
        self.next_said = start + every
        self.next_drawn = start + _COUNT_DELAY

    def __call__(self, done: int, total: int, name: str) -> None:
        """``done`` of ``total`` files read; ``name`` is being read now."""
        now = self.clock()
        text = f"{self.what}: {done}/{total} files ({name})"
        if self.live is not None:
            if now >= self.next_drawn:
                self.live.show(text)
                self.next_drawn = now + _COUNT_REDRAW
        elif now >= self.next_said:
            self.say(text)
            self.next_said = now + self.every

    def clear(self) -> None:
        """The read ended (or another line comes): no live line left behind."""
        if self.live is not None:
            self.live.clear()
