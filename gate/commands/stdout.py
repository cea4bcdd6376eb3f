"""Standard output that a reader going away (``cuda-gate inspect ... | head -1``) does not stop.

A command's exit status says whether its checks passed; a closed pipe must neither
turn a failure into 0 nor cut the checks short. :class:`Stdout` drops what is written
after the pipe closed and points file descriptor 1 at /dev/null, so Python's flush at
exit cannot fail either ("Exception ignored ... BrokenPipeError", exit 120). The command
then finishes: a failed check raises its own error; otherwise :meth:`Stdout.done`
raises the BrokenPipeError, which gate.cli reports as 141 (128 + SIGPIPE), as a shell
reports a command that SIGPIPE ended.
"""

from __future__ import annotations

import os
import sys
from typing import TextIO


def discard(stream: TextIO | None = None) -> None:
    """Point ``stream``'s descriptor (default stdout's) at /dev/null (nothing when it has
    none, as under pytest)."""
    try:
        fd = (sys.stdout if stream is None else stream).fileno()
    except (OSError, ValueError):  # io.UnsupportedOperation is both
        return
    devnull = os.open(os.devnull, os.O_WRONLY)
    try:
        os.dup2(devnull, fd)
    finally:
        os.close(devnull)


class Stdout:
    """``sys.stdout`` until its pipe closes; after that writes are dropped."""

    def __init__(self) -> None:
        self.lost: BrokenPipeError | None = None

    def write(self, text: str, *, flush: bool = False) -> None:
        """Write ``text`` (and flush) unless the reader has gone."""
        if self.lost is not None:
            return
        try:
            sys.stdout.write(text)
            if flush:
                sys.stdout.flush()
        except BrokenPipeError as e:
            self.lost = e
            discard()

    def flush(self) -> None:
        """Flush what is written so far."""
        self.write("", flush=True)

    def done(self) -> None:
        """Flush; raise the BrokenPipeError when some output did not reach the reader."""
        self.flush()
        if self.lost is not None:
            raise self.lost
