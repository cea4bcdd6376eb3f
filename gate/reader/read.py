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

import mmap
import os
import stat
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from gate.errors import BadInputError
from gate.reader import artifacts, fatbin
from gate.reader.artifacts import shown
from gate.reader.decoding import Threads, sha256_hex
from gate.reader.elffile import EM_CUDA, Buffer, ElfFile
from gate.reader.entries import DeviceEntry, Kind
from gate.reader.found import Found
from gate.reader.limits import Budget, Limits
from gate.reader.listing import Listing
from gate.reader.sections import PRIMARY_SECTIONS, host_containers
from gate.rules.targets import Target, Variant

# The library API (above); PRIMARY_SECTIONS is gate.reader.sections', named here as well.
__all__ = [
    "PRIMARY_SECTIONS",
    "ArtifactReport",
    "Progress",
    "Threads",
    "mapped",
    "read_archive",
    "read_artifact",
    "read_buffer",
    "read_wheel",
]

# A headers-only read of a host ELF whose device code is at most this many uncompressed
# cubins of at most this size each reads them whole (_maybe_kernel_less): nvcc's cubins
# for host-only code are about 1 kB each, one per target.
_STUB_ENTRIES = 32
_STUB_BYTES = 8 << 10


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
        found = Found(buf, display, names, budget, digests, threads=threads)
        try:
            found.add("(fatbin)", fatbin.parse_containers(buf, base, base + size, display))
            listing = found.listing()
        finally:
            found.close()  # no thread left reading ``buf``, whatever went wrong
        return ArtifactReport(display, "fatbin", listing=listing, names=names)
    elf = ElfFile(buf, display, base, size)
    if elf.machine == EM_CUDA:
        return _cubin_report(elf, display, names=names, digests=digests)
    found = Found(buf, display, names, budget, digests, threads=threads)
    try:
        sections = host_containers(buf, elf, display, scan=scan, search=found.search)
        for section, containers in sections:
            found.add(section, containers)
        listing = found.listing()
    finally:
        found.close()
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
        sha256=sha256_hex(elf.buf, elf.base, elf.size) if names and digests else "",
    )
    return ArtifactReport(
        display, "cubin", elf.elf_class, elf.machine_name, Listing((entry,)), names
    )


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
