"""Waiting for a command, and reading back the files its output went to.

Output goes to files, not pipes (a background process the command leaves behind keeps a
pipe open and would stall the gate; a file does not): read while it runs for its last
line, and once it ended, up to a limit.
"""

from __future__ import annotations

import contextlib
import os
import select
import subprocess
import time
from collections.abc import Callable, Sequence
from typing import IO

from gate.proc.result import LINE_SHOWN


def tail_line(*handles: IO[bytes]) -> str:
    """The last non-empty line written so far to either output file."""
    last = ""
    for handle in handles:
        try:
            size = os.fstat(handle.fileno()).st_size
            data = os.pread(handle.fileno(), 4096, max(0, size - 4096))
        except OSError:
            continue
        lines = [line.strip() for line in data.decode("utf-8", "replace").splitlines()]
        last = next((line for line in reversed(lines) if line), last)
    return last[:LINE_SHOWN]


def wait_for_exit(
    child: subprocess.Popen[bytes],
    timeout: float,
    ticks: Sequence[tuple[float, Callable[[float], None]]] = (),
) -> bool:
    """Wait for ``child`` to exit (True) or ``timeout`` seconds to pass (False); each
    ``(every, tick)`` of ``ticks`` is called every ``every`` seconds meanwhile, with the
    time elapsed.

    Popen.wait(timeout=...) polls with sleeps of up to 50 ms, which adds about 25 ms to
    every command; a pidfd (Linux 5.3+) wakes the moment the child exits.
    """
    start = time.monotonic()
    try:
        pidfd = os.pidfd_open(child.pid)
    except (AttributeError, OSError):
        pidfd = None
    due = [every for every, _ in ticks]
    try:
        while True:
            now = time.monotonic() - start
            left = timeout - now
            if left <= 0:
                return False
            step = max(0.0, min([left, *(d - now for d in due)]))
            if pidfd is None:
                with contextlib.suppress(subprocess.TimeoutExpired):
                    child.wait(timeout=step)
                    return True
            else:
                poller = select.poll()
                poller.register(pidfd, select.POLLIN)
                if poller.poll(min(max(0, int(step * 1000)), 2**31 - 1)):
                    child.wait()
                    return True
            now = time.monotonic() - start
            for i, (every, tick) in enumerate(ticks):
                if due[i] <= now < timeout:
                    tick(now)
                    due[i] += every
                    if due[i] <= now:  # a slow tick: the next one a whole interval on
                        due[i] = now + every
    finally:
        if pidfd is not None:
            os.close(pidfd)


def read_back(handle: IO[bytes], limit: int) -> tuple[str, bool]:
    """A stream's bytes, decoded, and whether it was cut: beyond ``limit`` only the head
    and the tail are kept."""
    size = handle.seek(0, os.SEEK_END)
    handle.seek(0)
    if size <= limit:
        data = handle.read()
        return data.decode("utf-8", errors="replace"), False
    half = limit // 2
    head = handle.read(half)
    handle.seek(size - half)
    tail = handle.read(half)
    note = f"\n[cuda-gate: {size - 2 * half} bytes of output cut here]\n"
    return head.decode("utf-8", "replace") + note + tail.decode("utf-8", "replace"), True
