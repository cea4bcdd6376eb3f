"""Measures of work for tests that would otherwise read the clock (issue 38).

A limit in seconds fails on a loaded machine and passes a regression on a fast one. The
unit tier bounds what the code does instead: the lines of Python it runs, the bytes it
reads, the memory it allocates. A hang still fails the test, after a deadline far past
any normal run (:data:`HANG_GUARD`), with the word "hung" rather than a stalled run. How
fast these cases are is measured in ``benchmarks/bench_bounds.py``.
"""

from __future__ import annotations

import signal
import sys
import threading
import time
import tracemalloc
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from types import FrameType
from typing import Any

import pytest

# Seconds before a test that should take milliseconds is called hung. Generous on purpose:
# a busy 2-CPU machine makes a normal run several times slower, never minutes.
HANG_GUARD = 60.0


@dataclass
class Measured:
    """What a measured block did: lines of Python run, bytes read or peak bytes allocated."""

    amount: int = 0


class TooMuchWork(BaseException):
    """More lines of Python than the test allows: raised inside the measured code.

    A BaseException, so that no ``except Exception`` in the code under test turns it into
    an ordinary error line.
    """


class _Hung(BaseException):
    """The hang guard's deadline passed (raised in the main thread by SIGALRM)."""


@contextmanager
def python_lines(limit: int) -> Iterator[Measured]:
    """Count the lines of Python run in the calls made inside the block, the standard
    library's included, by this thread and the threads started inside it (a reader's pool);
    past ``limit`` the block is stopped with TooMuchWork, so a loop per byte fails at once
    instead of running for minutes under the tracer.

    Code in C (a regular expression, a decompressor, ``bytes.find``) counts as the one line
    that calls it: a bound here says the Python work does not grow with the input. Where
    threads run, their waits for work add a few lines that vary from run to run.
    """
    counted = Measured()
    tallies: list[list[int]] = []  # one per thread: no two threads add to the same number
    mine = threading.local()

    def tracer() -> Callable[[FrameType, str, Any], Any]:
        tally = [0]
        tallies.append(tally)

        def local(_frame: FrameType, event: str, _arg: Any) -> Any:
            if event == "line":
                tally[0] += 1
                if tally[0] > limit:
                    raise TooMuchWork(f"more than {limit} lines of Python")
            return local

        return local

    def calls(_frame: FrameType, _event: str, _arg: Any) -> Any:
        try:
            return mine.local
        except AttributeError:
            mine.local = tracer()
            return mine.local

    previous, previous_threads = sys.gettrace(), threading.gettrace()
    sys.settrace(calls)
    threading.settrace(calls)
    try:
        yield counted
        # An error inside a trace function unsets it (a RecursionError in deep recursion):
        # the count would then be short.
        assert sys.gettrace() is calls, "the line counter was unset: the count is incomplete"
    except TooMuchWork as e:
        pytest.fail(str(e))
    finally:
        sys.settrace(previous)
        threading.settrace(previous_threads)
        counted.amount = sum(tally[0] for tally in tallies)


def _rchar() -> int:
    """What this process has read so far through read(2) and its kin (/proc/self/io)."""
    for line in Path("/proc/self/io").read_text(encoding="ascii").splitlines():
        if line.startswith("rchar:"):
            return int(line.split()[1])
    raise AssertionError("/proc/self/io has no rchar")


@contextmanager
def bytes_read() -> Iterator[Measured]:
    """The bytes this process reads inside the block (files, pipes; not mapped pages)."""
    counted = Measured()
    before = _rchar()
    yield counted
    counted.amount = _rchar() - before


@contextmanager
def peak_memory() -> Iterator[Measured]:
    """The most bytes the block had allocated at once through Python's allocators."""
    assert not tracemalloc.is_tracing(), "peak_memory does not nest"
    counted = Measured()
    tracemalloc.start()
    try:
        yield counted
        counted.amount = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


@contextmanager
def hang_guard(what: str, seconds: float = HANG_GUARD) -> Iterator[None]:
    """Fail the test, saying ``what`` hung, when the block runs past ``seconds`` (main thread)."""

    def on_alarm(_signum: int, _frame: FrameType | None) -> None:
        raise _Hung

    previous = signal.signal(signal.SIGALRM, on_alarm)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    except _Hung:
        pytest.fail(f"{what}: hung (still running after {seconds:.0f} s)")
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


def wait_for(condition: Callable[[], bool], what: str, seconds: float = HANG_GUARD) -> None:
    """Return once ``condition()`` holds; fail the test, saying ``what`` never came, when
    it still does not after ``seconds``."""
    deadline = time.monotonic() + seconds
    while not condition():
        if time.monotonic() > deadline:
            pytest.fail(f"{what}: never happened (hung for {seconds:.0f} s)")
        time.sleep(0.01)
