r"""How fast one section of a library comes off this machine's disk, by how it is asked for.

A cold names read of libcublasLt.so.13 waits for the disk: on the lent H100 host its walk of
``.nv_fatbin`` spent 0.11 s of CPU in 0.87 s (benchmarks/RESULTS.md). This probe tells
whether another way of asking would bring the same bytes in faster, before the reader is
changed to ask so. It prints the block device's queue settings, what one ``MADV_WILLNEED``
of 8 MB brings into the page cache (Linux reads at most the larger of ``read_ahead_kb``
and ``max_sectors_kb`` of one), then, for each way, the seconds and GB/s of bringing the
section in, the page cache dropped before each (root only; ``--no-drop`` times them warm,
which says nothing of the disk)::

    python benchmarks/disk_probe.py [--section .nv_fatbin] [--passes 2] [--no-drop] LIB

The ways: page faults of a map touched a page at a time (what the reader's walk does),
the same with ``MADV_SEQUENTIAL``, with ``MADV_WILLNEED`` kept 64 MB ahead in requests of
8 MB, 1 MB and 128 kB, ``pread`` of 8 MB pieces in one, four and sixteen processes, and the
touch beside one forked ``pread`` stream ahead of it.
"""

from __future__ import annotations

import argparse
import ctypes
import mmap
import os
import sys
import time
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from gate.errors import BadInputError  # noqa: E402
from gate.reader.elffile import ElfFile  # noqa: E402
from gate.reader.read import mapped  # noqa: E402

MB = 1 << 20
PIECE = 8 * MB  # a pread's size, and a WILLNEED call's span ahead of the touch
AHEAD = 64 * MB
PAGE = mmap.PAGESIZE
QUEUE = ("read_ahead_kb", "max_sectors_kb", "optimal_io_size", "nr_requests", "scheduler")


class Probe:
    """One file's section, brought in by each way in turn."""

    def __init__(self, path: str, section: str, *, drop: bool) -> None:
        self.path, self.drop_caches = path, drop
        # The reader's own map: a regular file only (no hang on a FIFO), one line for an
        # empty or unreadable one.
        with mapped(path) as m:
            elf = ElfFile(m, path, 0, len(m))
            found = next((s for s in elf.sections if s.name == section), None)
            if found is None:
                raise BadInputError(f"{path}: no {section} section")
            lo, self.hi = elf.span(found)
        self.lo = lo // PAGE * PAGE
        if self.hi - self.lo < PAGE:
            raise BadInputError(f"{path}: {section} is under a page")

    def drop(self) -> None:
        os.sync()
        Path("/proc/sys/vm/drop_caches").write_text("3\n")

    def touch(self, m: mmap.mmap, ask: Callable[[mmap.mmap, int, int], None] | None) -> int:
        """Read a byte of each page of the section, in order; ``ask`` is given the next
        PIECE past the last asked for while that is within AHEAD of the touch."""
        asked, total = self.lo, 0
        for at in range(self.lo, self.hi, PAGE):
            while ask is not None and asked < min(self.hi, at + AHEAD):
                ask(m, asked, min(asked + PIECE, self.hi))
                asked = min(asked + PIECE, self.hi)
            total += m[at]
        return total

    def read_in(self, streams: int) -> None:
        """``pread`` the section in PIECE pieces, split between ``streams`` processes."""
        step = -(-(self.hi - self.lo) // streams)
        pids = []
        for k in range(streams):
            pid = os.fork()
            if pid == 0:
                start = self.lo + k * step
                self._pread(start, min(self.hi, start + step))
                os._exit(0)
            pids.append(pid)
        for pid in pids:
            os.waitpid(pid, 0)

    def _pread(self, start: int, end: int) -> None:
        fd = os.open(self.path, os.O_RDONLY)
        scratch = memoryview(bytearray(PIECE))
        try:
            for at in range(start, end, PIECE):
                os.preadv(fd, [scratch[: min(PIECE, end - at)]], at)
        finally:
            os.close(fd)

    def beside_a_stream(self) -> None:
        pid = os.fork()
        if pid == 0:
            self._pread(self.lo, self.hi)
            os._exit(0)
        with mapped(self.path) as m:
            self.touch(m, None)
        os.waitpid(pid, 0)

    def ways(self) -> list[tuple[str, Callable[[], object]]]:
        def touch(ask: Callable[[mmap.mmap, int, int], None] | None, seq: bool = False) -> None:
            with mapped(self.path) as m:
                if seq:
                    m.madvise(mmap.MADV_SEQUENTIAL)
                self.touch(m, ask)

        def willneed(step: int) -> Callable[[mmap.mmap, int, int], None]:
            def ask(m: mmap.mmap, lo: int, hi: int) -> None:
                for at in range(lo, hi, step):
                    m.madvise(mmap.MADV_WILLNEED, at, min(step, hi - at))

            return ask

        return [
            ("map touched, faults alone", lambda: touch(None)),
            ("map touched, MADV_SEQUENTIAL", lambda: touch(None, seq=True)),
            ("map touched, WILLNEED 8 MB requests ahead", lambda: touch(willneed(8 * MB))),
            ("map touched, WILLNEED 1 MB requests ahead", lambda: touch(willneed(MB))),
            ("map touched, WILLNEED 128 kB requests ahead", lambda: touch(willneed(128 << 10))),
            ("pread 8 MB, 1 process", lambda: self.read_in(1)),
            ("pread 8 MB, 4 processes", lambda: self.read_in(4)),
            ("pread 8 MB, 16 processes", lambda: self.read_in(16)),
            ("map touched beside a forked pread stream", self.beside_a_stream),
        ]

    def one_willneed(self) -> int:
        """Bytes of the section's page cache one 8 MB MADV_WILLNEED brought in (mincore)."""
        start = self.lo + min(16 * MB, (self.hi - self.lo) // 2) // PAGE * PAGE
        size = min(PIECE, self.hi - start) // PAGE * PAGE
        if self.drop_caches:
            self.drop()
        with Path(self.path).open("rb") as f:
            # A private map: mincore needs its address (ctypes takes writable buffers only),
            # and a page never written is the page cache's own.
            m = mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_COPY)
        try:
            m.madvise(mmap.MADV_WILLNEED, start, size)
            time.sleep(0.5)
            vec = (ctypes.c_ubyte * (size // PAGE))()
            base = ctypes.addressof(ctypes.c_char.from_buffer(m))
            libc = ctypes.CDLL(None, use_errno=True)
            if libc.mincore(ctypes.c_void_p(base + start), ctypes.c_size_t(size), vec) != 0:
                return -1
            return sum(v & 1 for v in vec) * PAGE
        finally:
            m.close()


def queue_settings(path: str) -> str:
    """The block queue settings of the device holding ``path`` (its disk's, for a partition)."""
    dev = Path(path).stat().st_dev
    sys_dev = Path(f"/sys/dev/block/{os.major(dev)}:{os.minor(dev)}")
    for queue in (sys_dev / "queue", sys_dev / ".." / "queue"):
        if queue.is_dir():
            values = []
            for key in QUEUE:
                with_value = queue / key
                if with_value.is_file():
                    values.append(f"{key} {with_value.read_text().strip()}")
            return f"{sys_dev.resolve().name}: " + ", ".join(values)
    return f"device {os.major(dev)}:{os.minor(dev)}: no block queue (not a block device's file)"


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("library")
    parser.add_argument("--section", default=".nv_fatbin")
    parser.add_argument("--passes", type=int, default=2, help="each way this many times")
    parser.add_argument("--no-drop", action="store_true", help="keep the page cache (warm)")
    args = parser.parse_args(argv)
    if args.passes < 1:
        parser.error("--passes wants 1 or more")
    if not args.no_drop and os.geteuid() != 0:
        print("disk_probe.py: error: dropping the page cache needs root (or --no-drop)",
              file=sys.stderr)  # fmt: skip
        return 2
    try:
        probe = Probe(args.library, args.section, drop=not args.no_drop)
    except BadInputError as e:
        print(f"disk_probe.py: error: {e.message}", file=sys.stderr)
        return 2
    size = probe.hi - probe.lo
    print(f"{args.library}: {args.section} {size / 1e6:.1f} MB at {probe.lo:#x}")
    print(queue_settings(args.library))
    print(f"one 8 MB MADV_WILLNEED brought in {probe.one_willneed() >> 10} kB")
    print("\n| way | pass | s | GB/s |\n|---|---:|---:|---:|")
    for n in range(args.passes):
        for name, way in probe.ways():
            if not args.no_drop:
                probe.drop()
            start = time.perf_counter()
            way()
            took = time.perf_counter() - start
            print(f"| {name} | {n + 1} | {took:.3f} | {size / took / 1e9:.2f} |", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
