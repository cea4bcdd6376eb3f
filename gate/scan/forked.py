"""One artifact's entries decoded by forked copies of this process, not only by threads.

Decoding a large library's names is CPU work of which much holds the GIL (each cubin's
symbol table, each PTX text's ``.entry`` scan, in Python), so on many cores threads leave
most of them idle: libcublasLt.so.13's names read took 0.98 s warm on the lent H100's 16
cores with eight threads, no faster than on four. :class:`ForkedDecoders` runs the
reader's decoding function (:class:`gate.reader.decoding.Decoding`) in worker processes
forked at its first batch, while the file is mapped: each worker inherits the map and the
reader's state, takes batches of entry headers over a pipe, decodes them from its own
copy of the map and sends back what it found (kernel names, producers), pickled. Results
come back in the order the batches went out (:class:`concurrent.futures.Future` each).

Only where forking is safe and worth it (:func:`usable`): a platform with ``fork``, a
process running one thread (a fork copies a lock another thread holds), and not inside a
worker of :mod:`gate.scan.parallel` (which reads other files at the same time).
"""

from __future__ import annotations

import contextlib
import os
import pickle
import selectors
import signal
import struct
import threading
from collections import deque
from collections.abc import Callable
from concurrent.futures import Executor, Future
from typing import Any

from gate.reader.decoding import DecoderLostError

_LENGTH = struct.Struct("<Q")
# False in a process that must not fork decoders of its own (a worker of gate.scan.parallel).
_allowed = [True]


def usable() -> bool:
    """Whether this process may fork decoders now."""
    return _allowed[0] and hasattr(os, "fork") and threading.active_count() == 1


def forbid_in_this_process() -> None:
    """Make :func:`usable` false in this process (a pool worker, reading one of many files)."""
    _allowed[0] = False


class ForkedDecoders(Executor):
    """``workers`` processes running one function, forked at the first :meth:`submit`.

    Every submit must name the same function (the first one's): it is what the workers
    inherited. Each task goes to the worker that holds the fewest (:meth:`_least_held`).
    A worker that dies (killed for memory, say) fails the batches it held with
    :class:`gate.reader.decoding.DecoderLostError`, and is given no more; once every worker
    has ended, each later task fails so. The reader then decodes them itself.
    """

    # The workers change their own copies of the caller's state only (its budget).
    separate_memory = True

    def __init__(self, workers: int) -> None:
        self._workers = workers
        self._fn: Callable[..., Any] | None = None
        self._tasks: list[int] = []  # per worker: the write end of its task pipe
        self._pids: list[int] = []
        self._held: list[deque[Future[Any]]] = []  # per worker, its batches in order
        self._lost: list[bool] = []  # per worker: it ended
        self._next = 0
        self._lock = threading.Lock()
        self._collector: threading.Thread | None = None
        self._results: list[int] = []

    def submit(self, fn: Callable[..., Any], /, *args: Any, **kwargs: Any) -> Future[Any]:  # noqa: ANN401
        if self._fn is None:
            self._start(fn)
        elif fn != self._fn:
            raise ValueError("ForkedDecoders runs the function its workers were forked with")
        future: Future[Any] = Future()
        future.set_running_or_notify_cancel()
        with self._lock:
            k = self._least_held()
            if k is None:
                future.set_exception(DecoderLostError("every decoding worker ended early"))
                return future
            self._held[k].append(future)
        try:
            _send(self._tasks[k], pickle.dumps((args, kwargs), pickle.HIGHEST_PROTOCOL))
        except OSError:  # its pipe broke: it ended (its collector fails what it held)
            self._fail(future)
        return future

    def _least_held(self) -> int | None:
        """The running worker holding the fewest tasks, the next in turn among equals (None
        once every worker has ended). Tasks differ in cost (a cold 8 MB search, a batch of
        4 MB of zstd cubins or of 16 small entries): one handed out in turn waits behind
        whatever its worker still holds, though another may be idle."""
        n = len(self._tasks)
        live = [k for k in range(n) if not self._lost[k]]
        if not live:
            return None
        k = min(live, key=lambda k: (len(self._held[k]), (k - self._next) % n))
        self._next = (k + 1) % n
        return k

    def shutdown(self, wait: bool = True, *, cancel_futures: bool = False) -> None:  # noqa: ARG002
        """End the workers and wait for them (always: a worker may still read the map the
        caller closes next); with ``cancel_futures`` at once, killing them, else once each
        has done what it was given."""
        for fd in self._tasks:
            os.close(fd)  # a worker ends once its task pipe is closed and drained
        self._tasks = []
        if cancel_futures:
            for pid in self._pids:
                _kill(pid)
        if self._collector is not None:
            self._collector.join()
            self._collector = None
        for pid in self._pids:
            os.waitpid(pid, 0)
        self._pids = []  # the collector failed what each worker held when its pipe closed

    def _start(self, fn: Callable[..., Any]) -> None:
        self._fn = fn
        for _ in range(self._workers):
            task_r, task_w = os.pipe()
            result_r, result_w = os.pipe()
            pid = os.fork()
            if pid == 0:  # the worker
                os.close(task_w)
                os.close(result_r)
                for fd in self._tasks + self._results:
                    os.close(fd)
                _serve(fn, task_r, result_w)  # never returns
            os.close(task_r)
            os.close(result_w)
            self._tasks.append(task_w)
            self._results.append(result_r)
            self._pids.append(pid)
            self._held.append(deque())
            self._lost.append(False)
        self._collector = threading.Thread(target=self._collect, name="forked-decoders")
        self._collector.daemon = True
        self._collector.start()

    def _collect(self) -> None:
        with selectors.DefaultSelector() as sel:
            readers = {fd: _Reader(fd) for fd in self._results}
            for k, fd in enumerate(self._results):
                sel.register(fd, selectors.EVENT_READ, k)
            while readers:
                for key, _ in sel.select():
                    k, fd = key.data, key.fd
                    messages = readers[fd].read()
                    for message in messages or ():
                        ok, value = pickle.loads(message)  # noqa: S301  (our own fork's)
                        with self._lock:
                            future = self._held[k].popleft()
                        if ok:
                            future.set_result(value)
                        else:
                            future.set_exception(value)
                    if messages is None:  # the worker's end closed: it exited
                        sel.unregister(fd)
                        os.close(fd)
                        del readers[fd]
                        with self._lock:
                            self._lost[k] = True
                            held, self._held[k] = self._held[k], deque()
                        for future in held:
                            self._fail(future)
        self._results = []

    def _fail(self, future: Future[Any]) -> None:
        """``future`` failed with DecoderLostError, unless something settled it already."""
        with self._lock:
            if not future.done():
                future.set_exception(DecoderLostError("a decoding worker ended early"))


class _Reader:
    """Length-prefixed messages read from a pipe as they arrive (a worker's tasks, the
    parent's results)."""

    def __init__(self, fd: int) -> None:
        self._fd = fd
        self._buf = bytearray()

    def read(self) -> list[bytes] | None:
        """The messages now complete; None once the pipe is closed."""
        chunk = os.read(self._fd, 1 << 20)
        if not chunk:
            return None
        self._buf += chunk
        out = []
        while len(self._buf) >= _LENGTH.size:
            (size,) = _LENGTH.unpack_from(self._buf)
            if len(self._buf) < _LENGTH.size + size:
                break
            out.append(bytes(self._buf[_LENGTH.size : _LENGTH.size + size]))
            del self._buf[: _LENGTH.size + size]
        return out


def _send(fd: int, data: bytes) -> None:
    view = memoryview(_LENGTH.pack(len(data)) + data)
    while view:
        view = view[os.write(fd, view) :]


def _serve(fn: Callable[..., Any], tasks: int, results: int) -> None:
    """A worker: run ``fn`` on each task until the task pipe closes, then exit."""
    code = 0
    try:
        # The parent decides when a worker ends (it kills them); none runs a handler the
        # parent set for itself (a stage's cleanup on SIGTERM would run twice).
        signal.signal(signal.SIGINT, signal.SIG_IGN)
        for number in (signal.SIGTERM, signal.SIGHUP):
            signal.signal(number, signal.SIG_DFL)
        reader = _Reader(tasks)
        while (messages := reader.read()) is not None:
            for message in messages:
                args, kwargs = pickle.loads(message)  # noqa: S301  (our parent's)
                try:
                    reply = (True, fn(*args, **kwargs))
                except Exception as e:  # noqa: BLE001  (handed to the parent's future)
                    reply = (False, e)
                _send(results, pickle.dumps(reply, pickle.HIGHEST_PROTOCOL))
    except BaseException:  # noqa: BLE001  (a worker never returns into the parent's code)
        code = 1
    os._exit(code)


def _kill(pid: int) -> None:
    with contextlib.suppress(ProcessLookupError):
        os.kill(pid, signal.SIGKILL)
