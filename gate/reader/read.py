"""Our own inspector: device code of ELF files, archives, wheels, raw cubins and fatbins.

The library API (what reads one file; reading many, with the cache and pools of
processes, is :mod:`gate.scan`'s, which calls these):

``read_artifact(path, *, names=True) -> ArtifactReport``
    One file: an ELF executable, shared library or object, a raw ``.cubin`` or
    ``.fatbin``. Raises BadInputError (one line naming the file) if it cannot be read.
``read_wheel(path, *, names=True) -> tuple[ArtifactReport, ...]``
    Every ``.so`` (and ``.cubin``/``.fatbin``) inside a wheel, each streamed out of the
    zip into an unnamed temporary file and read mapped from there as a plain file is
    (memory does not grow with the member); a broken member gives a report with
    ``error`` set, the others are read.
``read_archive(path, *, names=True) -> tuple[ArtifactReport, ...]``
    Every ELF member of a static (``ar``) archive.
``read_buffer(buf, base, size, display, *, names=True) -> ArtifactReport``
    The ELF file, cubin or fatbin at ``buf[base:base+size]``.

``names=False`` reads headers only and never decompresses: kinds, targets (``a``/``f``
from the fatbin header flags), PTX ISA versions, compression and sizes; ``kernels``
stay empty and ``producer`` None. One exception: a host ELF whose device code is only a
few small uncompressed cubins is read whole, and when none holds a kernel its report is
that read's (``names`` True): nvcc gives host-only code one kernel-less cubin per target
(libcufftw.so: sm_52), which headers alone cannot tell from code.

``names=True`` also decompresses every entry for the kernel names (cubin STO_CUDA_ENTRY
symbols, PTX ``.entry``) and producers, and each entry's SHA-256 (of the code as the
driver is handed it: the decompressed cubin, the PTX text up to its NUL), by which a
module the driver loaded is told to be an inspected file's. ``digests=False`` leaves
that SHA-256 out (``""``): hashing every decoded byte is about as much work as
decompressing it, and only the run's launch accounting needs it, not a listing.
``threads`` (:class:`Threads`) starts the threads that decode a large artifact's
entries; without it (the default) every entry is decoded in the calling thread, and the
reader sets nothing up for the whole process: :func:`gate.scan.threads.decoding_pool`
is the engine's.

Which sections: ``.nv_fatbin`` if present, else ``__nv_relfatbin`` (as cuobjdump does:
``__nv_relfatbin`` in an executable is input for a later device link, not loaded at run
time); plus containers found by scanning the other sections the runtime could load one
from (allocated, non-code, non-TLS PROGBITS, less toolchain-owned tables and ranges
already read), such as the 24,453 that libcufft keeps in ``.ldata``. Each entry
records its section.
"""

from __future__ import annotations

import itertools
import mmap
import operator
import os
import stat
import struct
import zlib
from array import array
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path
from typing import TYPE_CHECKING, Protocol

from gate.errors import BadInputError
from gate.reader import artifacts, fatbin
from gate.reader.artifacts import shown
from gate.reader.elffile import EM_CUDA, SHF_EXECINSTR, Buffer, ElfFile, Section
from gate.reader.limits import Budget, Limits
from gate.reader.listing import DeviceEntry, EntryPacker, Kind, Listing
from gate.rules.targets import Target, Variant, Version

if TYPE_CHECKING:
    from concurrent.futures import Executor
    from hashlib import _Hash

PRIMARY_SECTIONS = (".nv_fatbin", "__nv_relfatbin")
_SHT_PROGBITS = 1
_SHF_ALLOC = 0x2
_SHF_TLS = 0x400
# PROGBITS sections whose layout is the toolchain's (unwind data, exception tables,
# pointer tables, 24-byte fatbin wrappers, module id strings): never a container.
_STRUCTURED = frozenset(
    (
        ".eh_frame", ".eh_frame_hdr", ".gcc_except_table", ".got", ".got.plt",
        ".ctors", ".dtors", ".jcr", ".nvFatBinSegment", "__nv_module_id", ".interp",
    )
)  # fmt: skip
_KINDS = {fatbin.KIND_PTX: Kind.PTX, fatbin.KIND_ELF: Kind.SASS, fatbin.KIND_NVVM: Kind.LTOIR}
# Fewer entries than this to decompress are not worth a thread pool, nor entries smaller
# than this on average: the Python work of each (which holds the GIL) then outweighs the
# decompression a thread runs without it, and threads contending for the GIL are slower
# than one. libcufft.so.11's 24,454 entries average 28 kB: 0.83 s in one thread, 1.03-1.14 s
# in two (2-core VM); libcublasLt.so.13's 1,486 distinct entries average 1.5 MB and
# libnccl.so.2's 466 1.4 MB: two threads 1.7x and 1.5x faster than one.
_PARALLEL_MIN = 16
_PARALLEL_MEAN_BYTES = 128 << 10
# A headers-only read of a host ELF whose device code is at most this many uncompressed
# cubins of at most this size each reads them whole (_maybe_kernel_less): nvcc's cubins
# for host-only code are about 1 kB each, one per target.
_STUB_ENTRIES = 32
_STUB_BYTES = 8 << 10
# Threads decoding names. Past 8 the per-entry Python work (which holds the GIL) bounds
# the speed, while memory grows with each thread (a payload held, and what the allocator
# keeps of those it freed). On the H200's 16 cores, 8 threads: libtorch_cuda.so 0.97 s /
# 292 MB, libcublasLt.so.13 1.09 s / 184 MB; 16 threads: 1.02 s / 445 MB and 1.08 s /
# 256 MB (medians of 5).
_WORKERS = 8
# Entries decoded by one task, and between two releases of the pages they were read from.
_BATCH = 16
_BATCH_BYTES = 4 << 20
# Decoding in this thread, the pages of a run of nearby entries are dropped once the run
# spans this many bytes.
_RELEASE_BYTES = 1 << 20
# Distinct payloads of one header signature kept to compare later entries against.
_DISTINCT_COMPARED = 4
# Bytes of released ranges between two sweeps of a whole map (_releaser), and what a
# fault may map around a range besides it (Linux: fault_around_bytes, 64 kB by default).
_SWEEP_BYTES = 4 << 20
_FAULT_AROUND = 64 << 10


@dataclass(frozen=True)
class ArtifactReport:
    """What one artifact carries: its host ELF identity and its device-code listing."""

    path: str  # as given; "lib.a(member.o)" for archive members, "x.whl!lib/x.so" in wheels
    format: str  # "ELF", "cubin", "fatbin", or "unknown" when it could not be read
    elf_class: int | None = None
    machine: str | None = None
    listing: Listing = field(default_factory=Listing)
    names: bool = True  # kernels and producers were decoded
    error: str | None = None


# Files done, files known so far, the file read now.
Progress = Callable[[int, int, str], None]


class Threads(Protocol):
    """Starts a pool of ``workers`` threads to decode one artifact's entries on (shut down
    once they are decoded); :func:`gate.scan.threads.decoding_pool` is one."""

    def __call__(self, workers: int, /) -> Executor: ...


@dataclass(slots=True)
class _Decoded:
    """What decoding one entry found. ``code``: its index in the listing's EntryPacker,
    set when the first entry holding it is added (its copies then name the same)."""

    kernels: tuple[str, ...]
    producer: str | None
    variant: Variant
    traps: tuple[str, ...] = ()
    empty: tuple[str, ...] = ()
    sha256: str = ""
    code: int | None = None


def read_artifact(
    path: str | os.PathLike[str],
    *,
    names: bool = True,
    scan: bool = True,
    limits: Limits | None = None,
    digests: bool = True,
    threads: Threads | None = None,
) -> ArtifactReport:
    """The report for one ELF file, raw cubin or raw fatbin; BadInputError if unreadable."""
    with mapped(path) as buf:
        return read_buffer(
            buf, 0, len(buf), shown(path), names=names, scan=scan, limits=limits,
            digests=digests, threads=threads,
        )  # fmt: skip


def read_archive(
    path: str | os.PathLike[str],
    *,
    names: bool = True,
    scan: bool = True,
    limits: Limits | None = None,
    digests: bool = True,
    threads: Threads | None = None,
) -> tuple[ArtifactReport, ...]:
    """Reports for every ELF member of a static archive."""
    reports = []
    name = shown(path)
    with mapped(path) as buf:
        for member, offset, size in artifacts.archive_members(buf, 0, len(buf), name):
            display = f"{name}({member})"
            if buf[offset : offset + 4] != b"\x7fELF":
                continue
            try:
                report = read_buffer(
                    buf, offset, size, display, names=names, scan=scan, limits=limits,
                    digests=digests, threads=threads,
                )  # fmt: skip
                reports.append(report)
            except BadInputError as e:
                reports.append(ArtifactReport(display, "unknown", error=e.message))
    return tuple(reports)


def read_wheel(
    path: str | os.PathLike[str],
    *,
    names: bool = True,
    scan: bool = True,
    limits: Limits | None = None,
    progress: Progress | None = None,
    digests: bool = True,
    threads: Threads | None = None,
) -> tuple[ArtifactReport, ...]:
    """Reports for every shared library, cubin and fatbin inside a wheel (or any zip).

    A member that cannot be read (encrypted, corrupted, over a bound) gives a report
    with ``error`` set; the other members are still read. ``progress`` hears (members
    done, members in all, the one read now) before each member.
    """
    limits = limits or Limits.from_env()
    name = shown(path)
    reports = []
    with artifacts.open_zip(path, name) as archive:
        members = artifacts.wheel_members(archive.zip)
        for i, info in enumerate(members):
            display = f"{name}!{shown(info.filename)}"
            if progress is not None:
                progress(i, len(members), display)
            try:
                with artifacts.inflated(archive, info, display, limits) as buf:
                    report = read_buffer(
                        buf, 0, len(buf), display, names=names, scan=scan, limits=limits,
                        digests=digests, threads=threads,
                    )  # fmt: skip
                reports.append(report)
            except artifacts.ScratchError:
                raise  # no room in the temporary folder: the same for every member
            except BadInputError as e:
                reports.append(ArtifactReport(display, "unknown", error=e.message))
    return tuple(reports)


def read_buffer(
    buf: Buffer,
    base: int,
    size: int,
    display: str,
    *,
    names: bool = True,
    scan: bool = True,
    limits: Limits | None = None,
    digests: bool = True,
    threads: Threads | None = None,
) -> ArtifactReport:
    """The report for the ELF file, cubin or fatbin at ``buf[base:base+size]``."""
    budget = Budget(limits or Limits.from_env(), display)
    head = bytes(buf[base : base + 8])
    if head.startswith(fatbin.CONTAINER_PREFIX):
        found = _Found(buf, display, names, budget, digests, threads=threads)
        found.add("(fatbin)", fatbin.parse_containers(buf, base, base + size, display))
        return ArtifactReport(display, "fatbin", listing=found.listing(), names=names)
    elf = ElfFile(buf, display, base, size)
    if elf.machine == EM_CUDA:
        return _cubin_report(elf, display, names=names, digests=digests)
    found = _Found(buf, display, names, budget, digests, threads=threads)
    sections = elf.sections
    primary = next((s for name in PRIMARY_SECTIONS for s in sections if s.name == name), None)
    if primary is not None:
        start, end = elf.span(primary)
        found.add(
            primary.name, fatbin.parse_containers(buf, start, end, display, done=_releaser(buf))
        )
    parsed = [elf.span(primary)] if primary is not None else []
    for section in sections if scan else ():
        if not _may_hold_containers(section):
            continue
        start, end = elf.span(section)
        for lo, hi in _outside(start, end, parsed):
            found.add(
                section.name, fatbin.scan_containers(buf, lo, hi, display, done=_releaser(buf))
            )
        parsed.append((start, end))
    listing = found.listing()
    if not names and _maybe_kernel_less(listing):
        # Headers alone cannot tell nvcc's kernel-less cubins (one per target for host
        # code: libcufftw.so's sm_52) from code; a few small raw cubins are read whole.
        try:
            full = read_buffer(
                buf, base, size, display, scan=scan, limits=limits, digests=digests,
                threads=threads,
            )  # fmt: skip
        except BadInputError:
            full = None  # what headers alone read stands; a names read says what is wrong
        if full is not None and not full.listing.kernels():
            return full
    return ArtifactReport(display, "ELF", elf.elf_class, elf.machine_name, listing, names)


def _maybe_kernel_less(listing: Listing) -> bool:
    """Whether a headers-only listing is nothing but small uncompressed cubins, which a
    library built by nvcc from host code alone carries (about 1 kB per target)."""
    entries = listing.entries
    return 0 < len(entries) <= _STUB_ENTRIES and all(
        e.kind is Kind.SASS and e.compression == "none" and e.size <= _STUB_BYTES for e in entries
    )


def _may_hold_containers(section: Section) -> bool:
    """Whether a container the runtime could load may sit in ``section``.

    Only bytes loaded at run time (SHF_ALLOC, PROGBITS), not code, not TLS templates,
    not the primary section (parsed, not scanned), and not the sections whose format
    the toolchain owns (unwind tables, GOT, the fatbin wrappers and module ids).
    """
    return (
        section.type == _SHT_PROGBITS
        and bool(section.flags & _SHF_ALLOC)
        and not section.flags & (SHF_EXECINSTR | _SHF_TLS)
        and section.name not in PRIMARY_SECTIONS
        and section.name not in _STRUCTURED
        and section.size >= 80
    )


def _outside(start: int, end: int, parsed: list[tuple[int, int]]) -> list[tuple[int, int]]:
    """``[start, end)`` less the ranges already parsed or scanned (sections can overlap)."""
    pieces = [(start, end)]
    for lo, hi in parsed:
        pieces = [
            part
            for a, b in pieces
            for part in ((a, min(b, lo)), (max(a, hi), b))
            if part[1] - part[0] > 0
        ]
    return pieces


def _cubin_report(elf: ElfFile, display: str, *, names: bool, digests: bool) -> ArtifactReport:
    from gate.reader.cubin import read_cubin  # noqa: PLC0415  (headers-only runs never need it)

    # Headers only: no kernel bodies judged (trap stubs and empty kernels are names-mode
    # facts, never shown without names) and no digest; a listing of flashinfer-cubin's
    # 15,970 cubin files spent most of its time there.
    info = read_cubin(elf.buf, elf.base, elf.size, display, judge_bodies=names, elf=elf)
    variant = Variant.ARCH if info.arch_specific else Variant.NONE
    entry = DeviceEntry(
        Kind.SASS,
        Target.from_number(info.arch, variant, virtual=False),
        kernels=info.kernels,
        section="(cubin)",
        stored_size=elf.size,
        size=elf.size,
        producer=info.producer,
        traps=info.traps,
        empty=info.empty,
        sha256=_sha256(elf.buf, elf.base, elf.size) if names and digests else "",
    )
    return ArtifactReport(
        display, "cubin", elf.elf_class, elf.machine_name, Listing((entry,)), names
    )


class _Headers:
    """Entry headers kept packed until they are decoded: their integers in one array,
    the few non-empty idents aside. As tuples (with their integers) libcufft.so.11's
    24,454 headers held 6 MB of its names read; packed, 2.2 MB in one block, which the
    allocator gives back whole."""

    def __init__(self) -> None:
        self._ints = array("Q")
        self._idents: dict[int, str] = {}
        self._count = 0

    def extend(self, entries: Iterable[fatbin.Entry]) -> None:
        ints, idents = self._ints, self._idents
        for e in entries:
            if e.ident:
                idents[self._count] = e.ident
            ints.extend(_integers(e))
            self._count += 1

    def __len__(self) -> int:
        return self._count

    def __getitem__(self, i: int) -> fatbin.Entry:
        if not 0 <= i < self._count:
            raise IndexError(i)
        return _unpacked(_PACKED.unpack_from(self._ints, i * _PACKED.size), self._idents.get(i, ""))

    def __iter__(self) -> Iterator[fatbin.Entry]:
        get = self._idents.get
        for i, v in enumerate(_PACKED.iter_unpack(self._ints)):
            yield _unpacked(v, get(i, ""))

    def packed(self) -> Iterator[tuple[int, ...]]:
        """Each header's integers (Entry's fields but its ident), with no Entry built."""
        return _PACKED.iter_unpack(self._ints)


# A packed header: Entry's fields but its ident, in order (every one read unsigned).
_IDENT = fatbin.Entry._fields.index("ident")
_PACKED_FIELDS = [name for name in fatbin.Entry._fields if name != "ident"]
_PACKED = struct.Struct(f"={len(_PACKED_FIELDS)}Q")
_integers = operator.itemgetter(
    *(i for i, name in enumerate(fatbin.Entry._fields) if name != "ident")
)


def _unpacked(integers: tuple[int, ...], ident: str) -> fatbin.Entry:
    """The header whose integers (as :data:`_PACKED` holds them) and ident these are."""
    return fatbin.Entry._make((*integers[:_IDENT], ident, *integers[_IDENT:]))


_SIGNATURE = ("kind", "flags", "arch", "major", "minor", "payload_size", "compressed_size",
              "uncompressed_size")  # fmt: skip
# The header fields two copies of an entry share, from an Entry or from its packed form.
_fields = operator.itemgetter(*(fatbin.Entry._fields.index(name) for name in _SIGNATURE))
_packed_fields = operator.itemgetter(*(_PACKED_FIELDS.index(name) for name in _SIGNATURE))
_PACKED_KIND = _PACKED_FIELDS.index("kind")
_PACKED_SIZES = operator.itemgetter(
    _PACKED_FIELDS.index("payload_size"), _PACKED_FIELDS.index("uncompressed_size")
)


class _Found:
    """The entries of one artifact's containers, gathered section by section into its
    Listing (kept as columns: :class:`~gate.reader.listing.EntryPacker`). Headers only:
    each entry is added as its container is read, and the header is let go
    (libcufft.so.11 holds 24,453 containers in .ldata). With names, the headers are kept,
    packed, until all are decoded (copies are found across the whole artifact)."""

    def __init__(
        self,
        buf: Buffer,
        display: str,
        names: bool,
        budget: Budget,
        digests: bool,
        *,
        threads: Threads | None,
    ) -> None:
        self.buf, self.display, self.names = buf, display, names
        self.budget, self.digests, self.threads = budget, digests, threads
        # With names: the headers waiting to be decoded, and their sections as runs of
        # (section, count) (a pair per header was 1.5 MB of cuFFT's 24,454).
        self.pending = _Headers()
        self.sections: list[tuple[str, int]] = []
        self.entries = EntryPacker()
        # Entries sharing a header signature share kind, target, ISA and compression:
        # those are worked out, and given their packer index, once per signature and
        # section, not once per entry (libcublasLt: 5,666 entries, ~60 signatures; enum
        # and Target hashing made the per-entry cost add up). Value: (index, stored raw).
        self.memo: dict[tuple[str, int, int, int, int, int, int], tuple[int, bool]] = {}

    def add(self, section: str, containers: Iterable[fatbin.Container]) -> None:
        if self.names:
            before = len(self.pending)
            for c in containers:
                self.pending.extend(c.entries)
            if len(self.pending) > before:
                self.sections.append((section, len(self.pending) - before))
            return
        add = self._add
        for c in containers:
            for e in c.entries:
                add(section, e, None)

    def listing(self) -> Listing:
        headers, self.pending = self.pending, _Headers()
        if headers:
            first = _first_copies(self.buf, headers)
            each = _decode_all(
                self.buf, headers, first,
                display=self.display, budget=self.budget, digests=self.digests,
                threads=self.threads,
            )  # fmt: skip
            add = self._add
            for section, count in self.sections:
                for e, d in itertools.islice(each, count):
                    add(section, e, d)
            # One step past the last entry: the generator drops its last run of pages and
            # its pool ends (left suspended, neither would happen).
            if next(each, None) is not None:
                raise RuntimeError(f"{self.display}: more entries decoded than were read")
        return Listing(self.entries.entries())

    def _add(self, section: str, e: fatbin.Entry, d: _Decoded | None) -> None:
        variant = _VARIANT_KEYS[d.variant] if d else -1
        key = (section, e.kind, e.flags, e.arch, e.major, e.minor, variant)
        known = self.memo.get(key)
        if known is None:
            kind, target, isa, compression, raw, debug = _shared(
                e, d.variant if d else Variant.NONE
            )
            shape = self.entries.shape(kind, target, isa, section, compression, debug)
            known = self.memo[key] = (shape, raw)
        shape, raw = known
        code = EntryPacker.NO_CODE
        if d is not None:
            if d.code is None:  # decoded once, whoever copies it: kept once
                d.code = self.entries.code(d.kernels, d.producer, d.traps, d.empty, d.sha256)
            code = d.code
        if raw:
            self.entries.add(shape, e.payload_size, e.payload_size, e.ident or None, code)
        else:
            self.entries.add(shape, e.compressed_size, e.uncompressed_size, e.ident or None, code)


def _decode_all(
    buf: Buffer,
    headers: _Headers,
    first: array[int],
    *,
    display: str,
    budget: Budget,
    digests: bool = True,
    threads: Threads | None = None,
) -> Iterator[tuple[fatbin.Entry, _Decoded | None]]:
    """Every entry of ``headers`` in order, with what it decodes to: an entry that is the
    first of its copies (``first[i] == i``, :func:`_first_copies`) is decoded, once; a
    copy is given its first's result (:func:`_with_copies`). On ``threads`` when they
    are worth it, else in this thread."""
    release = _releaser(buf)
    workers = min(os.cpu_count() or 1, _WORKERS)
    if threads is None or workers == 1 or not _worth_threads(headers, first):
        # Pages are dropped a run of nearby entries at a time, not entry by entry (a
        # system call each; cuFFT's entries are a container header apart).
        lo = hi = 0  # the run of pages read and not yet dropped: [lo, hi)

        def decoded(e: fatbin.Entry) -> _Decoded | None:
            nonlocal lo, hi
            found = _decode(buf, e, display, budget, digests)
            if hi == lo or not hi <= e.offset <= hi + _FAULT_AROUND:
                if hi > lo:
                    release(lo, hi)
                lo = e.offset
            hi = e.payload_offset + e.payload_size
            if hi - lo >= _RELEASE_BYTES:
                release(lo, hi)
                lo = hi
            return found

        yield from _with_copies(headers, first, decoded)
        if hi > lo:
            release(lo, hi)
        return
    # lz4 and zstd release the GIL while decompressing: threads use every core. Chunks
    # of a few entries (each task costs GIL time), handed out with no barrier between
    # them: a worker never waits for another's large entry. Results come back in order;
    # each chunk's pages are dropped once decoded.
    work = [e for i, e in enumerate(headers) if first[i] == i]
    chunks = list(_batches(work))

    def chunk(span: tuple[int, int]) -> list[_Decoded | None]:
        lo, hi = span
        found = [_decode(buf, e, display, budget, digests) for e in work[lo:hi]]
        # Dropped by the thread that read them, at once: a thread ahead of the others
        # would otherwise hold its pages until the results before its own were taken.
        last = work[hi - 1]
        release(work[lo].offset, last.payload_offset + last.payload_size)
        return found

    with threads(workers) as pool:
        results = itertools.chain.from_iterable(pool.map(chunk, chunks))
        try:
            yield from _with_copies(headers, first, lambda _e: next(results))
        except BaseException:
            pool.shutdown(cancel_futures=True)  # a bad entry: decode no further
            raise


def _with_copies(
    headers: _Headers, first: array[int], decoded: Callable[[fatbin.Entry], _Decoded | None]
) -> Iterator[tuple[fatbin.Entry, _Decoded | None]]:
    """Each entry with ``decoded(entry)`` for the first of its copies (asked in order), and
    that same result for each later copy; only results a later copy needs are kept."""
    # first[i] <= i: a copy's first is decoded (and kept) before the copy is reached.
    kept: dict[int, _Decoded | None] = {f: None for i, f in enumerate(first) if f != i}
    for i, e in enumerate(headers):
        f = first[i]
        if f != i:
            yield e, kept[f]
            continue
        d = decoded(e)
        if i in kept:
            kept[i] = d
        yield e, d


def _worth_threads(headers: _Headers, first: array[int]) -> bool:
    """Whether decoding the entries of ``headers`` that are no copies (``first``) is worth
    a pool of threads (_PARALLEL_MEAN_BYTES)."""
    count = decoded = 0
    for i, v in enumerate(headers.packed()):
        if first[i] == i and v[_PACKED_KIND] != fatbin.KIND_NVVM:  # LTO IR: never decoded
            count += 1
            decoded += max(_PACKED_SIZES(v))
    return count >= _PARALLEL_MIN and decoded >= _PARALLEL_MEAN_BYTES * count


def _first_copies(buf: Buffer, headers: _Headers) -> array[int]:
    """For each entry, the index of the first entry with the same header and payload bytes.

    Libraries repeat entries (libcublasLt: 4,479 of its 5,666 are copies, mostly small
    device-link stubs): decoding each payload once saves the per-entry cost of the rest.
    Only entries whose header fields all agree are compared, byte for byte, each against
    at most a few distinct payloads (so a crafted file cannot make this quadratic); a
    CRC-32 of each payload (read in place, its pages dropped after) is compared first,
    so no payload is held: sgl-kernel's flash_ops holds 546 raw cubins of up to 6 MB.
    LTO IR is never decoded, so never compared. Entries are grouped by their fields'
    hash, and a group of one is its index alone: a tuple and a list per entry were 6 MB
    of cuFFT's 24,454 headers.
    """
    release = _releaser(buf)
    first = array("q", range(len(headers)))
    groups: dict[int, int | list[int]] = {}
    for i, v in enumerate(headers.packed()):
        if v[_PACKED_KIND] == fatbin.KIND_NVVM:
            continue
        key = hash(_packed_fields(v))
        seen = groups.get(key)
        if seen is None:
            groups[key] = i
        elif isinstance(seen, int):
            groups[key] = [seen, i]
        else:
            seen.append(i)
    with memoryview(buf) as view:

        def payload(e: fatbin.Entry) -> memoryview:
            return view[e.payload_offset : e.payload_offset + e.payload_size]

        for members in groups.values():
            if isinstance(members, int):
                continue
            # Fields that differ but hash alike (a crafted file can make them: flags and
            # sizes are 64-bit) are kept apart, each with its own few payloads compared.
            by_fields: dict[tuple[int, ...], list[tuple[int, int]]] = {}  # entry, CRC-32
            for i in members:
                e = headers[i]
                crc = zlib.crc32(payload(e))
                release(e.payload_offset, e.payload_offset + e.payload_size)
                distinct = by_fields.setdefault(_fields(e), [])
                same = next(
                    (j for j, seen in distinct
                     if seen == crc and payload(headers[j]) == payload(e)),
                    None,
                )  # fmt: skip
                if same is not None:
                    first[i] = same
                elif len(distinct) < _DISTINCT_COMPARED:
                    distinct.append((i, crc))
    return first


def _batches(entries: list[fatbin.Entry]) -> Iterator[tuple[int, int]]:
    """Index ranges of at most _BATCH entries and about _BATCH_BYTES stored bytes each."""
    lo, stored = 0, 0
    for i, e in enumerate(entries):
        stored += e.header_size + e.payload_size
        if i + 1 - lo >= _BATCH or stored >= _BATCH_BYTES:
            yield lo, i + 1
            lo, stored = i + 1, 0
    if lo < len(entries):
        yield lo, len(entries)


def _keep(_lo: int, _hi: int) -> None:
    """Releasing pages is not possible (or not needed) for this buffer."""


def _releaser(buf: Buffer) -> Callable[[int, int], None]:
    """A function dropping the pages ``buf[lo:hi]`` touches from this process (a
    read-only file map only: every mmap the reader makes)."""
    if not isinstance(buf, mmap.mmap) or not hasattr(mmap, "MADV_DONTNEED"):
        return _keep
    page, size = mmap.PAGESIZE, len(buf)
    released = [0]  # bytes since the last sweep; shared by the threads, approximate

    def release(lo: int, hi: int) -> None:
        # Every page the range touches, the partial ones at its ends included, and now
        # and then every page of the map: a fault maps the pages around it as well
        # (fault-around), pages no range of ours names. The map is read-only and of a
        # file: a dropped page that a neighbour or another thread still reads comes back
        # from the page cache, never lost, and a sweep costs microseconds. With whole
        # pages inside each range only, libcufft.so.11's 24,453 small entries in .ldata
        # kept 60 MB of the file mapped by the time the copies had been looked for.
        first, last = lo // page * page, min(-(-hi // page) * page, size)
        released[0] += last - first + _FAULT_AROUND
        if released[0] >= _SWEEP_BYTES:
            released[0] = 0
            first, last = 0, size
        if last > first:
            buf.madvise(mmap.MADV_DONTNEED, first, last - first)

    return release


def _decode(
    buf: Buffer, entry: fatbin.Entry, display: str, budget: Budget, digests: bool = True
) -> _Decoded | None:
    if entry.kind == fatbin.KIND_NVVM:
        return None  # LTO IR payloads are opaque: listed, never decoded
    from gate.reader.cubin import scan_ptx  # noqa: PLC0415  (names only: start-up)

    where = f"{display}: fatbin entry at {entry.offset:#x}"
    if entry.kind == fatbin.KIND_PTX:
        # Streamed: a PTX text is read once from the front, never held whole.
        pieces = fatbin.payload_chunks(buf, entry, display, budget.limits, budget)
        sha256 = ""
        if digests:
            # Imported only here: OpenSSL is 4 MB of start-up and 1.8 MB of pages that
            # an inspection (no digests) never needs.
            import hashlib  # noqa: PLC0415

            digest = hashlib.sha256()
            ptx = scan_ptx(_hashed(pieces, digest), where)
            sha256 = digest.hexdigest()
        else:
            ptx = scan_ptx(pieces, where)
        target = ptx.target or ""
        variant = {"a": Variant.ARCH, "f": Variant.FAMILY}.get(target[-1:], Variant.NONE)
        return _Decoded(ptx.kernels, ptx.producer, variant, sha256=sha256)
    if fatbin.spills(entry):
        with fatbin.spilled(buf, entry, display, budget.limits, budget) as (data, start, size):
            return _cubin_decoded(data, start, size, where, digests)
    data, start, size = fatbin.payload(buf, entry, display, budget.limits, budget)
    return _cubin_decoded(data, start, size, where, digests)


def _cubin_decoded(buf: Buffer, start: int, size: int, where: str, digests: bool) -> _Decoded:
    from gate.reader.cubin import read_cubin  # noqa: PLC0415  (names only: start-up)

    cubin = read_cubin(buf, start, size, where)
    return _Decoded(
        cubin.kernels,
        cubin.producer,
        Variant.ARCH if cubin.arch_specific else Variant.NONE,
        cubin.traps,
        cubin.empty,
        _sha256(buf, start, size) if digests else "",
    )


def _sha256(buf: Buffer, start: int, size: int) -> str:
    """The SHA-256 of ``buf[start:start+size]``, without copying it."""
    import hashlib  # noqa: PLC0415  (names only: OpenSSL is 4 MB of start-up)

    with memoryview(buf) as view:
        return hashlib.sha256(view[start : start + size]).hexdigest()


def _hashed(pieces: Iterable[bytes], digest: _Hash) -> Iterator[bytes]:
    """``pieces`` as they are, the text up to its first NUL added to ``digest``.

    scan_ptx asks for no piece after the one holding the NUL: the digest covers the text
    the driver reads, whatever padding follows it.
    """
    for piece in pieces:
        nul = piece.find(b"\0")
        digest.update(piece if nul < 0 else piece[:nul])
        yield piece
        if nul >= 0:
            return


_Shared = tuple[Kind, Target, Version | None, str, bool, bool]
_VARIANT_KEYS = {Variant.NONE: 0, Variant.ARCH: 1, Variant.FAMILY: 2}


def _shared(e: fatbin.Entry, decoded_variant: Variant) -> _Shared:
    """Kind, target, PTX ISA, compression, stored raw?, debug: what the header decides."""
    kind = _KINDS[e.kind]
    if e.flags & fatbin.FLAG_FAMILY_SPECIFIC:
        variant = Variant.FAMILY
    elif e.flags & fatbin.FLAG_ARCH_SPECIFIC:
        variant = Variant.ARCH
    else:
        variant = decoded_variant
    compression = e.compression
    return (
        kind,
        _target(e.arch, variant, kind is Kind.PTX),
        _version(e.major, e.minor) if kind is Kind.PTX else None,
        compression,
        compression == "none",
        bool(e.flags & fatbin.FLAG_DEBUG),
    )


@cache
def _target(arch: int, variant: Variant, virtual: bool) -> Target:
    return Target.from_number(arch, variant, virtual=virtual)


@cache
def _version(major: int, minor: int) -> Version:
    return Version(major, minor)


class mapped:  # noqa: N801  (used as a context manager, reads like a function)
    """A read-only mmap of a regular file, closed on exit; BadInputError for anything else."""

    def __init__(self, path: str | os.PathLike[str]) -> None:
        self.path = path
        self._map: mmap.mmap | None = None

    def __enter__(self) -> mmap.mmap:
        # What artifacts.open_regular does, on the descriptor alone: this runs once per
        # file (flashinfer-cubin ships 15,970), where a file object cost more than the map.
        flags = os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_CLOEXEC", 0)
        try:
            fd = os.open(self.path, flags)
            try:
                st = os.fstat(fd)
                if not stat.S_ISREG(st.st_mode):
                    kind = artifacts.file_kind(st.st_mode)
                    raise BadInputError(f"{self._name()}: not a regular file ({kind})")
                if st.st_size == 0:
                    raise BadInputError(f"{self._name()}: empty file")
                self._map = mmap.mmap(fd, 0, access=mmap.ACCESS_READ)
            finally:
                os.close(fd)
        except OSError as e:
            raise BadInputError(f"{self._name()}: cannot read: {e.strerror or e}") from e
        return self._map

    def _name(self) -> str:
        return shown(Path(self.path))  # as a Path prints it (folded separators): as before

    def __exit__(self, *_exc: object) -> None:
        if self._map is not None:
            self._map.close()
