"""One artifact's entries decoded by forked processes: the same listing, the same errors,
the same decompression bound as threads, no process left behind, and never where a fork
is unsafe (gate.scan.forked)."""

from __future__ import annotations

import os
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from gate.errors import BadInputError
from gate.reader import decoding, fatbin
from gate.reader.decoding import DecoderLostError
from gate.reader.limits import Limits
from gate.reader.read import read_artifact
from gate.scan import forked, threads
from tests.test_reader_pipeline import one_container_per_entry

# The suite's own "still-running" thread is alive during each test, so these tests fork a
# process with two threads (the gate never does: gate.scan.forked.usable); Python 3.12
# warns of that, harmless here: the thread takes no lock a worker needs.
pytestmark = [
    pytest.mark.unit,
    pytest.mark.filterwarnings("ignore:This process:DeprecationWarning"),
]

GOLDEN = Path(__file__).parent / "golden"


@pytest.fixture(autouse=True)
def _small_batches(monkeypatch: pytest.MonkeyPatch) -> None:
    """Every batch of one entry, each worth a pool: the golden files then use one."""
    monkeypatch.setattr(decoding, "PARALLEL_MIN", 1)
    monkeypatch.setattr(decoding, "PARALLEL_MEAN_BYTES", 1)
    monkeypatch.setattr(decoding, "_BATCH", 1)
    monkeypatch.setattr(os, "cpu_count", lambda: 4)


class Started:
    """The ForkedDecoders a read starts, kept to look at afterwards."""

    def __init__(self) -> None:
        self.pools: list[forked.ForkedDecoders] = []

    def __call__(self, workers: int) -> forked.ForkedDecoders:
        self.pools.append(forked.ForkedDecoders(workers))
        return self.pools[-1]


def _fatbin(tmp_path: Path, golden: str) -> Path:
    """A fatbin file of ``golden``'s entries, each in a container of its own."""
    path = tmp_path / "x.fatbin"
    path.write_bytes(one_container_per_entry(GOLDEN / golden))
    return path


def _entries(path: Path) -> list[fatbin.Entry]:
    blob = path.read_bytes()
    return [e for c in fatbin.parse_containers(blob, 0, len(blob), "x") for e in c.entries]


def _gone(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    return False


@pytest.mark.parametrize("golden", ["libkernels.so", "debug.fatbin", "multi.o"])
def test_forked_decoders_read_what_one_thread_reads(golden: str, tmp_path: Path) -> None:
    path = _fatbin(tmp_path, golden)
    started = Started()
    report = read_artifact(path, threads=started)
    assert len(started.pools) == 1  # the batches went to forked workers
    assert report.listing == read_artifact(path).listing
    assert report.listing.kernels()
    assert started.pools[0]._pids == []  # shut down, every worker reaped


def test_an_error_in_a_worker_is_the_one_a_serial_read_gives(tmp_path: Path) -> None:
    blob = bytearray(one_container_per_entry(GOLDEN / "libkernels.so"))
    second = fatbin.parse_container(blob, 0, len(blob), "x").size
    entry = fatbin.parse_container(blob, second, len(blob), "x").entries[0]
    blob[entry.payload_offset : entry.payload_offset + 4] = b"JUNK"  # no ELF cubin any more
    bad = tmp_path / "x.fatbin"
    bad.write_bytes(blob)
    with pytest.raises(BadInputError) as serial:
        read_artifact(bad)
    started = Started()
    with pytest.raises(BadInputError) as spread:
        read_artifact(bad, threads=started)
    assert spread.value.message == serial.value.message
    assert started.pools
    assert not started.pools[0]._pids  # shut down, every worker reaped


def test_the_decompression_bound_holds_over_all_the_workers(tmp_path: Path) -> None:
    # debug.fatbin: two zstd entries of about 10 kB each. One worker each: no copy of the
    # budget passes the bound alone, their sum does, as in one process.
    path = _fatbin(tmp_path, "debug.fatbin")
    sizes = [e.uncompressed_size for e in _entries(path) if e.compression != "none"]
    assert len(sizes) >= 2
    limits = Limits(artifact=sum(sizes) - 1)
    with pytest.raises(BadInputError) as serial:
        read_artifact(path, limits=limits)
    with pytest.raises(BadInputError) as spread:
        read_artifact(path, limits=limits, threads=lambda _w: forked.ForkedDecoders(len(sizes)))
    assert "decompressing past" in serial.value.message
    assert "decompressing past" in spread.value.message
    assert read_artifact(path, limits=Limits(artifact=sum(sizes)), threads=Started()).listing


def test_batches_of_a_worker_that_died_are_decoded_by_the_reader(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A worker killed (for memory, say) loses the batches it held: the read still gives
    # the whole listing, decoding them itself.
    path = _fatbin(tmp_path, "multi.o")
    parent = os.getpid()
    real = decoding.Decoding._decode_charged

    def dies(self: decoding.Decoding, batch: list[fatbin.Entry]) -> object:
        if os.getpid() != parent:
            os._exit(9)
        return real(self, batch)

    monkeypatch.setattr(decoding.Decoding, "_decode_charged", dies)
    started = Started()
    report = read_artifact(path, threads=started)
    assert started.pools
    assert report.listing == read_artifact(path).listing


def _sleep(seconds: float) -> float:
    time.sleep(seconds)
    return seconds


def _ends(code: int) -> None:
    os._exit(code)


def _pid_once(path: str) -> int:
    """This worker's pid, once ``path`` exists (at once for "")."""
    while path and not Path(path).exists():
        time.sleep(0.01)
    return os.getpid()


def _sleep_or_end(seconds: float) -> float:
    if seconds < 0:
        os._exit(3)
    return _sleep(seconds)


def test_results_come_in_order_and_a_lost_worker_says_so() -> None:
    pool = forked.ForkedDecoders(3)
    try:
        futures = [pool.submit(_sleep, s) for s in (0.2, 0.0, 0.1, 0.0)]
        assert [f.result(timeout=30) for f in futures] == [0.2, 0.0, 0.1, 0.0]
    finally:
        pool.shutdown()
    lost = forked.ForkedDecoders(1)
    try:
        first = lost.submit(_ends, 3)
        with pytest.raises(DecoderLostError):
            first.result(timeout=30)
        with pytest.raises(DecoderLostError):  # given to it after it ended
            lost.submit(_ends, 3).result(timeout=30)
    finally:
        lost.shutdown()
    other = forked.ForkedDecoders(1)
    try:
        assert other.submit(_sleep, 0).result(timeout=30) == 0
        with pytest.raises(ValueError, match="forked with"):  # its workers run _sleep only
            other.submit(_ends, 0)
    finally:
        other.shutdown()


def test_a_busy_worker_is_handed_nothing_while_another_is_idle(tmp_path: Path) -> None:
    # Handed out in turn, every second task would wait behind the busy worker's (a cold
    # 8 MB search or a batch of large cubins is such a task): here it never ends until
    # the test lets it, so the result of the second quick task would never come.
    go = tmp_path / "go"
    pool = forked.ForkedDecoders(2)
    try:
        busy = pool.submit(_pid_once, str(go))
        idle = {pool.submit(_pid_once, "").result(timeout=30) for _ in range(4)}
        go.touch()
        assert len(idle) == 1
        assert busy.result(timeout=30) not in idle
    finally:
        go.touch()
        pool.shutdown()


def test_a_worker_that_ended_is_handed_nothing_more() -> None:
    pool = forked.ForkedDecoders(2)
    try:
        with pytest.raises(DecoderLostError):
            pool.submit(_sleep_or_end, -1).result(timeout=30)
        assert [pool.submit(_sleep_or_end, 0).result(timeout=30) for _ in range(4)] == [0] * 4
    finally:
        pool.shutdown()


def test_a_cancelled_pool_kills_its_workers_at_once() -> None:
    pool = forked.ForkedDecoders(2)
    futures = [pool.submit(_sleep, 60) for _ in range(2)]
    pids = list(pool._pids)
    started = time.monotonic()
    pool.shutdown(cancel_futures=True)
    assert time.monotonic() - started < 10
    assert all(_gone(pid) for pid in pids)
    assert all(isinstance(f.exception(timeout=5), DecoderLostError) for f in futures)


def test_no_fork_where_it_is_unsafe_or_not_worth_it(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(forked, "_allowed", [True])
    monkeypatch.setattr(os, "cpu_count", lambda: 16)
    with monkeypatch.context() as alone:  # as in the gate: the suite's own thread aside
        alone.setattr(threading, "active_count", lambda: 1)
        pool = threads.decoding_pool(8)
    assert isinstance(pool, forked.ForkedDecoders)
    pool.shutdown()
    monkeypatch.setattr(os, "cpu_count", lambda: 2)  # measured slower on 2 cores
    pool2 = threads.decoding_pool(2)
    assert isinstance(pool2, ThreadPoolExecutor)
    pool2.shutdown()
    monkeypatch.setattr(os, "cpu_count", lambda: 16)
    stop = threading.Event()
    other = threading.Thread(target=stop.wait)
    other.start()
    try:  # another thread may hold a lock a fork would copy held
        assert not forked.usable()
        pool3 = threads.decoding_pool(8)
        assert isinstance(pool3, ThreadPoolExecutor)
        pool3.shutdown()
    finally:
        stop.set()
        other.join()
    forked.forbid_in_this_process()  # a worker of gate.scan.parallel
    assert not forked.usable()


def test_once_processes_run_they_take_the_small_batches_too(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Threads leave a batch of small entries to the reading thread (their Python work
    # holds the GIL); processes hold no GIL in common: left to the reader, cuDNN's 1,760
    # small entries kept it busy long after its sixteen workers were done.
    path = _fatbin(tmp_path, "libkernels.so")
    sizes = [
        max(e.payload_size, e.uncompressed_size)
        for e in _entries(path)
        if e.kind in decoding.DECODED
    ]
    bar = max(sizes[:-1])  # the first entry this large starts the pool
    first = sizes.index(bar)
    assert any(s < bar for s in sizes[first + 1 :])  # small ones come after it
    monkeypatch.setattr(decoding, "PARALLEL_MEAN_BYTES", bar)
    parent, here = os.getpid(), []
    real = decoding.Decoding._decode

    def counted(self: decoding.Decoding, batch: list[fatbin.Entry]) -> object:
        if os.getpid() == parent:
            here.extend(batch)
        return real(self, batch)

    monkeypatch.setattr(decoding.Decoding, "_decode", counted)
    report = read_artifact(path, threads=Started())
    assert len(here) == first  # only those before the pool started
    assert report.listing == read_artifact(path).listing
    here.clear()
    read_artifact(path, threads=ThreadPoolExecutor)
    assert len(here) > first  # threads: the small ones after it as well
