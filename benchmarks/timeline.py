r"""Where one `cuda-gate` process spends its time: marks, wall and CPU, from launch to exit.

Runs the command line given (``cuda-gate``'s arguments) in this process with marks at the
points a names read passes: the command starts, the artifact's read starts, the decoding
workers are forked, the reader's walk ends, the first and last decoded results come back,
the workers are reaped, the process exits. Each mark is printed to stderr at exit as wall
seconds since the launch (``T0``, ``time.time()`` taken by the shell before it started the
interpreter, else this script's start) and this process's CPU seconds::

    T0=$(date +%s.%N) python benchmarks/timeline.py inspect --no-detect --names --no-cache LIB

``--cpus N`` (first) makes the gate see N cores (``os.cpu_count``, the affinity mask): 2 to
read with threads where forked decoders would run, 16 to fork them on a small machine.
benchmarks/forked_check.py uses it to compare both reads. The gate is the one the
interpreter imports (installed, or first on ``PYTHONPATH``: another revision's tree to
compare with). The marks wrap the reader's functions by name: tests/test_bench_timeline.py
fails when one of them is renamed.
"""

from __future__ import annotations

import atexit
import os
import sys
import time
from collections.abc import Callable, Iterator
from typing import Any

T0 = float(os.environ.get("T0") or time.time())
MARKS: list[tuple[str, float, float]] = []


def mark(what: str) -> None:
    MARKS.append((what, time.time() - T0, time.process_time()))


def _wrap(owner: Any, name: str, before: str, after: str | None = None) -> None:
    """``owner.name`` marked ``before`` each call and ``after`` it returned."""
    inner: Callable[..., Any] = getattr(owner, name)

    def marked(*args: Any, **kwargs: Any) -> Any:
        mark(before)
        result = inner(*args, **kwargs)
        if after is not None:
            mark(after)
        return result

    setattr(owner, name, marked)


def install() -> None:
    """Marks in the gate's reader, decoding pool and inspect command."""
    # Imported here: the imports are part of what is timed, after the first marks.
    from gate.commands import inspect  # noqa: PLC0415
    from gate.reader import decoding, read  # noqa: PLC0415
    from gate.scan import forked  # noqa: PLC0415

    _wrap(inspect, "_handle", "inspect starts")
    _wrap(read, "read_buffer", "artifact read starts", "artifact read done")
    _wrap(forked.ForkedDecoders, "_start", "forking decoders", "decoders forked")
    _wrap(forked.ForkedDecoders, "shutdown", "decoders shut down", "decoders reaped")
    results = decoding.Decoding.results

    def marked_results(self: decoding.Decoding) -> Iterator[decoding.Decoded | None]:
        mark("walk done, results asked")
        first = True
        for found in results(self):
            if first:
                mark("first result back")
                first = False
            yield found
        mark("last result back")

    decoding.Decoding.results = marked_results  # type: ignore[method-assign]


def fake_cpus(n: int) -> None:
    """Make this process (and what it forks) see ``n`` cores."""
    setattr(os, "cpu_count", lambda: n)  # noqa: B010  (a function of the os module)
    setattr(os, "sched_getaffinity", lambda _pid: set(range(n)))  # noqa: B010


def report() -> None:
    mark("exit")
    for what, wall, cpu in MARKS:
        print(f"{wall:8.3f} {cpu:8.3f}  {what}", file=sys.stderr)


def main(argv: list[str]) -> int:
    mark("interpreter up")
    if argv[:1] == ["--cpus"]:
        if len(argv) < 2 or not argv[1].isdigit() or int(argv[1]) < 1:
            print(
                "timeline.py: error: --cpus wants a whole number of cores, 1 or more",
                file=sys.stderr,
            )
            return 2
        fake_cpus(int(argv[1]))
        argv = argv[2:]
    from gate import cli  # noqa: PLC0415

    mark("gate.cli imported")
    install()
    atexit.register(report)
    sys.argv = ["cuda-gate", *argv]
    return cli.entry()


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
