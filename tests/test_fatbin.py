"""Our fatbin reader on the golden binaries (built by tests/golden/make_golden.sh) and bad input."""

from __future__ import annotations

import mmap
import struct
import zipfile
from pathlib import Path
from typing import Any

import pytest

from gate.errors import BadInputError
from gate.reader import fatbin, payloads
from gate.reader.limits import Limits
from gate.reader.listing import Kind
from gate.reader.read import read_archive, read_artifact, read_buffer, read_wheel
from gate.scan.walk import read_paths
from tests.elfbuild import elf_with_section

GOLDEN = Path(__file__).parent / "golden"
KERNELS = ("_Z11write_valuePi", "_Z5twicePi", "_Z7add_onePi")

pytestmark = pytest.mark.unit


def _summary(path: Path, *, names: bool = True) -> list[tuple[str, str, str | None, str]]:
    report = read_artifact(path, names=names)
    return [
        (e.kind.value, str(e.target), str(e.ptx_isa) if e.ptx_isa else None, e.compression)
        for e in report.listing.entries
    ]


def test_multi_arch_object_lists_a_and_f_targets_in_order() -> None:
    assert _summary(GOLDEN / "multi.o") == [
        ("SASS", "sm_90", None, "none"),
        ("PTX", "compute_90", "9.0", "zstd"),
        ("SASS", "sm_120f", None, "none"),
        ("SASS", "sm_100a", None, "none"),
        ("PTX", "compute_100a", "9.0", "zstd"),
    ]


def test_kernel_names_of_every_sass_and_ptx_entry() -> None:
    report = read_artifact(GOLDEN / "multi.o")
    for entry in report.listing.entries:
        assert sorted(entry.kernels) == list(KERNELS), entry
    sass = report.listing.of_kind(Kind.SASS)[0]
    assert sass.producer is not None
    assert sass.producer.startswith("ptxas V13.")
    assert report.machine == "x86-64"
    assert report.elf_class == 64


def test_headers_only_reads_targets_without_names() -> None:
    report = read_artifact(GOLDEN / "multi.o", names=False)
    assert not report.names
    assert all(e.kernels == () and e.producer is None for e in report.listing.entries)
    assert _summary(GOLDEN / "multi.o", names=False) == _summary(GOLDEN / "multi.o")


def test_shared_library_has_dlink_stubs_and_lz4_ptx() -> None:
    report = read_artifact(GOLDEN / "libkernels.so")
    kinds = [(e.kind.value, str(e.target), e.compression) for e in report.listing.entries]
    assert kinds == [
        ("SASS", "sm_80", "none"),
        ("SASS", "sm_120", "none"),
        ("SASS", "sm_80", "none"),
        ("PTX", "compute_80", "lz4"),
        ("SASS", "sm_120", "none"),
    ]
    stubs = [e for e in report.listing.entries if e.is_stub]
    assert len(stubs) == 2
    assert all(s.producer and s.producer.startswith("nvlink") for s in stubs)
    assert report.listing.kernels() == KERNELS
    assert report.listing.missing_kernels() == {}


def test_debug_fatbin_is_all_zstd_and_flagged_debug() -> None:
    report = read_artifact(GOLDEN / "debug.fatbin")
    assert report.format == "fatbin"
    assert [(e.kind, e.compression, e.debug) for e in report.listing.entries] == [
        (Kind.SASS, "zstd", True),
        (Kind.PTX, "zstd", True),
    ]
    assert all(sorted(e.kernels) == list(KERNELS) for e in report.listing.entries)


def test_raw_cubin_arch_specific_from_nv_compat() -> None:
    report = read_artifact(GOLDEN / "sm_90a.cubin")
    (entry,) = report.listing.entries
    assert (report.format, str(entry.target), sorted(entry.kernels)) == (
        "cubin",
        "sm_90a",
        list(KERNELS),
    )


def test_static_archive_with_lto_ir_in_relfatbin() -> None:
    (member,) = read_archive(GOLDEN / "libkernels.a")
    assert member.path.endswith("libkernels.a(lto.o)")
    entries = [(e.kind, str(e.target), e.section) for e in member.listing.entries]
    assert entries == [
        (Kind.LTOIR, "sm_90", "__nv_relfatbin"),
        (Kind.SASS, "sm_90", "__nv_relfatbin"),
    ]
    assert member.listing.entries[0].kernels == ()


def test_wheel_members_read_from_the_zip_and_a_broken_member_reported(tmp_path: Path) -> None:
    wheel = tmp_path / "demo-1.0-py3-none-linux_x86_64.whl"
    so = (GOLDEN / "libkernels.so").read_bytes()
    with zipfile.ZipFile(wheel, "w", zipfile.ZIP_DEFLATED) as z:
        z.writestr("demo/libkernels.so", so)
        z.writestr("demo/libbroken.so.1", so)
        z.writestr("demo/README.txt", "not a library")
    data = bytearray(wheel.read_bytes())
    # Corrupt the second member's compressed bytes: its CRC check must fail.
    second = data.find(b"demo/libbroken.so.1") + len("demo/libbroken.so.1") + 100
    data[second : second + 64] = bytes(64)
    wheel.write_bytes(bytes(data))
    good, broken = read_wheel(wheel)
    assert good.path.endswith("!demo/libkernels.so")
    assert good.error is None
    assert good.listing.kernels() == KERNELS
    assert broken.error is not None
    assert "libbroken.so.1" in broken.error
    assert "\n" not in broken.error


def test_folder_walk_finds_every_artifact_and_reports_bad_ones(tmp_path: Path) -> None:
    (tmp_path / "sub").mkdir()
    (tmp_path / "sub" / "libkernels.so").write_bytes((GOLDEN / "libkernels.so").read_bytes())
    (tmp_path / "notes.txt").write_text("plain text is skipped inside folders")
    (tmp_path / "truncated.so").write_bytes((GOLDEN / "libkernels.so").read_bytes()[:3000])
    reports = list(read_paths([tmp_path, tmp_path / "missing.so"]))
    by_name = {Path(r.path.split("!")[0]).name: r for r in reports}
    assert set(by_name) == {"libkernels.so", "truncated.so", "missing.so"}
    assert by_name["libkernels.so"].error is None
    assert "truncated" in (by_name["truncated.so"].error or "")
    assert "no such file" in (by_name["missing.so"].error or "")


@pytest.mark.parametrize(
    ("data", "message"),
    [
        (b"", "empty file"),
        (b"hello world, not an ELF file at all", "not an ELF file"),
        (b"\x7fELF\x09\x01" + bytes(60), "corrupted ELF header"),
    ],
)
def test_non_elf_and_corrupted_headers(tmp_path: Path, data: bytes, message: str) -> None:
    path = tmp_path / "bad.so"
    path.write_bytes(data)
    with pytest.raises(BadInputError, match=message) as info:
        read_artifact(path)
    assert str(path) in info.value.one_line()


def _first_entry(buf: bytes | bytearray) -> int:
    """Offset of the first entry header of the first container in ``buf``."""
    return buf.find(fatbin.CONTAINER_PREFIX) + 16


def test_entry_size_past_the_end_is_bad_input() -> None:
    buf = bytearray((GOLDEN / "debug.fatbin").read_bytes())
    struct.pack_into("<Q", buf, _first_entry(buf) + 8, 1 << 40)
    with pytest.raises(BadInputError, match="past its container"):
        read_buffer(bytes(buf), 0, len(buf), "x.fatbin")


def test_container_size_past_the_end_is_bad_input() -> None:
    buf = bytearray((GOLDEN / "debug.fatbin").read_bytes())
    struct.pack_into("<Q", buf, 8, 1 << 33)
    with pytest.raises(BadInputError, match="past the end"):
        read_buffer(bytes(buf), 0, len(buf), "x.fatbin")


def test_decompression_bomb_is_refused() -> None:
    buf = bytearray((GOLDEN / "debug.fatbin").read_bytes())
    struct.pack_into("<Q", buf, _first_entry(buf) + 0x38, fatbin.MAX_UNCOMPRESSED + 1)
    with pytest.raises(BadInputError, match="refusing"):
        read_buffer(bytes(buf), 0, len(buf), "x.fatbin")
    # Headers alone never decompress, so they still read.
    assert len(read_buffer(bytes(buf), 0, len(buf), "x.fatbin", names=False).listing.entries) == 2


def test_declared_size_disagreeing_with_the_zstd_frame_is_bad_input() -> None:
    buf = bytearray((GOLDEN / "debug.fatbin").read_bytes())
    entry = _first_entry(buf)
    size = struct.unpack_from("<Q", buf, entry + 0x38)[0]
    struct.pack_into("<Q", buf, entry + 0x38, size + 8)
    with pytest.raises(BadInputError, match="zstd frame declares"):
        read_buffer(bytes(buf), 0, len(buf), "x.fatbin")


def test_scan_finds_containers_outside_nv_fatbin_and_skips_lookalikes() -> None:
    real = (GOLDEN / "debug.fatbin").read_bytes()
    # A fake magic with an absurd size, junk, then a real container: only the real one counts.
    blob = fatbin.CONTAINER_PREFIX + struct.pack("<Q", 1 << 40) + b"junk" * 5 + real
    found = list(fatbin.scan_containers(blob, 0, len(blob), "blob", chunk=16))
    assert [c.offset for c in found] == [len(blob) - len(real)]
    assert len(found[0].entries) == 2


@pytest.mark.parametrize("gap", [0, 8, 24, 25, 31, 32, 33, 39, 40, 41, 64, 4096])
@pytest.mark.parametrize("filler", [b"\0", b"\x50", b"\xed"])
def test_scan_finds_every_container_whatever_lies_between(gap: int, filler: bytes) -> None:
    # Containers a few bytes apart are looked for near the last one before a full search
    # (cuFFT's 24,454): each must still be found, and only they, whatever the gap holds,
    # including a partial magic that runs up to the next container or across the window.
    real = (GOLDEN / "debug.fatbin").read_bytes()
    between = (filler * gap)[:gap]
    if gap >= 4:
        between = between[:-4] + fatbin.CONTAINER_PREFIX[:4]  # a lookalike's first bytes
    blob = real + between + real + between + real + between
    with mmap.mmap(-1, len(blob)) as mapped:
        mapped.write(blob)
        for buf in (blob, mapped):
            found = list(fatbin.scan_containers(buf, 0, len(blob), "blob"))
            step = len(real) + len(between)
            assert [c.offset for c in found] == [0, step, 2 * step]
            assert all(len(c.entries) == 2 for c in found)


def test_impossible_lz4_ratio_is_refused_before_allocating() -> None:
    buf = bytearray((GOLDEN / "libkernels.so").read_bytes())
    elf_end = len(buf)
    report = read_buffer(bytes(buf), 0, elf_end, "libkernels.so", names=False)
    assert [e.compression for e in report.listing.entries].count("lz4") == 1
    pos = buf.find(fatbin.CONTAINER_PREFIX)
    container = fatbin.parse_container(bytes(buf), pos, elf_end, "libkernels.so")
    while not any(e.compression == "lz4" for e in container.entries):
        pos = buf.find(fatbin.CONTAINER_PREFIX, pos + 16)
        container = fatbin.parse_container(bytes(buf), pos, elf_end, "libkernels.so")
    lz4_entry = next(e for e in container.entries if e.compression == "lz4")
    struct.pack_into("<Q", buf, lz4_entry.offset + 0x38, fatbin.MAX_UNCOMPRESSED)
    with pytest.raises(BadInputError, match="more than 200:1, a decompression bomb"):
        read_buffer(bytes(buf), 0, elf_end, "libkernels.so")
    # Past the general ratio bound (raised by the user), LZ4's own limit still holds.
    with pytest.raises(BadInputError, match="impossible LZ4 ratio"):
        read_buffer(bytes(buf), 0, elf_end, "libkernels.so", limits=Limits(ratio=1 << 30))


def test_identical_entries_are_decoded_once_and_each_gets_the_names(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from gate.reader import decoding

    one = (GOLDEN / "debug.fatbin").read_bytes()
    calls: list[fatbin.Entry] = []
    real = decoding.decode

    def counted(
        buf: bytes, entry: fatbin.Entry, display: str, budget: Any, digests: bool = True
    ) -> Any:
        calls.append(entry)
        return real(buf, entry, display, budget, digests)

    monkeypatch.setattr(decoding, "decode", counted)
    report = read_buffer(one * 3, 0, 3 * len(one), "x3.fatbin")
    assert len(report.listing.entries) == 6
    assert all(sorted(e.kernels) == list(KERNELS) for e in report.listing.entries)
    assert len(calls) == 2  # one SASS and one PTX payload, each decoded once


def test_names_are_decoded_by_at_most_eight_threads_however_many_cores(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    import concurrent.futures
    import os

    from gate.reader import decoding
    from gate.scan import files, threads

    pools: list[int | None] = []
    arenas: list[int] = []  # how many pools had been made when threads were given one arena

    class Recorded(concurrent.futures.ThreadPoolExecutor):
        def __init__(self, max_workers: int | None = None) -> None:
            pools.append(max_workers)
            super().__init__(max_workers)

    monkeypatch.setattr(concurrent.futures, "ThreadPoolExecutor", Recorded)

    def one_arena() -> bool:
        arenas.append(len(pools))
        return True

    monkeypatch.setattr(threads, "one_malloc_arena", one_arena)
    monkeypatch.setattr(os, "cpu_count", lambda: 64)
    monkeypatch.setattr(decoding, "PARALLEL_MIN", 1)
    one = (GOLDEN / "debug.fatbin").read_bytes()
    # Entries this small (a few kB) are decoded by this thread: threads contending for
    # the GIL over small entries are slower than one (libcufft.so.11: 1.03 s against 0.83).
    report = files.read_buffer(one * 3, 0, 3 * len(one), "x3.fatbin")
    assert all(sorted(e.kernels) == list(KERNELS) for e in report.listing.entries)
    assert pools == []
    monkeypatch.setattr(decoding, "PARALLEL_MEAN_BYTES", 1)
    # The reader alone starts no thread and sets nothing up for the process: the engine
    # hands it its pool (gate.scan.threads).
    alone = read_buffer(one * 3, 0, 3 * len(one), "x3.fatbin")
    assert (pools, arenas) == ([], [])
    threaded = files.read_buffer(one * 3, 0, 3 * len(one), "x3.fatbin")
    assert threaded.listing == report.listing == alone.listing
    # More threads only add memory: the per-entry work that holds the GIL bounds the speed.
    assert pools == [8]
    assert arenas == [0]  # before the threads exist: they allocate from the main arena


def test_scan_skips_what_cannot_hold_a_loadable_container(tmp_path: Path) -> None:
    from gate.reader.elffile import Section
    from gate.reader.sections import _may_hold_containers, _outside

    def section(name: str, typ: int = 1, flags: int = 0x2) -> Section:
        return Section(1, name, typ, flags, 0, 0, 4096, 0, 0, 0)

    assert _may_hold_containers(section(".ldata", flags=0x2 | 0x1 | 0x10000000))  # libcufft's
    assert _may_hold_containers(section(".rodata"))
    assert _may_hold_containers(section(".cask_resource"))
    assert not _may_hold_containers(section(".debug_info", flags=0))  # not loaded
    assert not _may_hold_containers(section(".text", flags=0x6))
    assert not _may_hold_containers(section(".tdata", flags=0x403))
    assert not _may_hold_containers(section(".eh_frame"))
    assert not _may_hold_containers(section(".bss", typ=8, flags=0x3))
    assert not _may_hold_containers(section(".nv_fatbin"))  # parsed, not scanned
    assert _outside(0, 100, [(10, 20), (90, 200)]) == [(0, 10), (20, 90)]
    assert _outside(0, 100, [(0, 100)]) == []


def test_containers_in_ldata_are_found_as_in_libcufft() -> None:
    # libcufft keeps 24,453 containers in .ldata (writable, SHF_X86_64_LARGE) and one
    # in .nv_fatbin; cuobjdump sees only that one. The default scan must find them.
    real = (GOLDEN / "debug.fatbin").read_bytes()
    blob = b"junk" * 7 + real + real
    elf = elf_with_section(b".ldata", 0x2 | 0x1 | 0x10000000, blob)
    report = read_buffer(elf, 0, len(elf), "libcufft-like.so", names=True)
    assert [(e.section, e.kind) for e in report.listing.entries] == [
        (".ldata", Kind.SASS), (".ldata", Kind.PTX), (".ldata", Kind.SASS), (".ldata", Kind.PTX),
    ]  # fmt: skip
    assert report.listing.kernels() == KERNELS
    assert read_buffer(elf, 0, len(elf), "x.so", scan=False).listing.entries == ()


def _lz4_fatbin(source: bytes) -> bytes:
    """``source``'s first container rebuilt with every payload LZ4-compressed, as nvcc's
    default (and NCCL's, CuPy's) fatbins hold them."""
    import lz4.block

    container = next(fatbin.parse_containers(source, 0, len(source), "source"))
    body = b""
    for e in container.entries:
        data, lo, size = payloads.payload(source, e, "source")
        block = lz4.block.compress(bytes(data[lo : lo + size]), store_size=False)
        stored = block + bytes(-len(block) % 8)
        header = bytearray(source[e.offset : e.offset + e.header_size])
        flags = (e.flags & ~fatbin.FLAG_ZSTD) | fatbin.FLAG_LZ4
        struct.pack_into("<Q", header, 8, len(stored))
        struct.pack_into("<I", header, 16, len(block))
        struct.pack_into("<Q", header, 40, flags)
        struct.pack_into("<Q", header, 56, size)
        body += bytes(header) + stored
    return struct.pack("<IHHQ", fatbin.CONTAINER_MAGIC, 1, 16, len(body)) + body


@pytest.mark.parametrize("compression", ["zstd", "lz4"])
def test_a_large_entry_read_through_a_temporary_file_reads_the_same(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, compression: str
) -> None:
    # Past payloads.SPILL_BYTES (zstd) or LZ4_SPILL_BYTES a compressed entry is decompressed
    # into a temporary file and read mapped (payloads.spilled; an LZ4 block by the C library
    # through ctypes, its pages dropped while it writes): the same report, digests
    # included, as decompressed in memory, from a buffer and from a mapped file.
    import tempfile

    data = (GOLDEN / "debug.fatbin").read_bytes()
    if compression == "lz4":
        data = _lz4_fatbin(data)
    file = tmp_path / "entries.fatbin"
    file.write_bytes(data)
    whole = read_buffer(data, 0, len(data), "debug.fatbin")
    assert {e.compression for e in whole.listing.entries} == {compression}
    assert whole.listing.kernels() == KERNELS
    monkeypatch.setattr(payloads, "SPILL_BYTES", 0)
    monkeypatch.setattr(payloads, "LZ4_SPILL_BYTES", 0)
    assert read_buffer(data, 0, len(data), "debug.fatbin") == whole
    mapped = read_artifact(file)
    assert mapped.listing == whole.listing

    # No temporary file to be had: decompressed in memory, the same again.
    def refused(*_: object, **__: object) -> None:
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(tempfile, "TemporaryFile", refused)
    assert read_buffer(data, 0, len(data), "debug.fatbin") == whole


def test_lz4_without_its_c_function_is_decompressed_in_memory_the_same(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    data = _lz4_fatbin((GOLDEN / "debug.fatbin").read_bytes())
    whole = read_buffer(data, 0, len(data), "x.fatbin")
    monkeypatch.setattr(payloads, "LZ4_SPILL_BYTES", 0)
    monkeypatch.setattr(payloads, "lz4_function", lambda: None)
    assert read_buffer(data, 0, len(data), "x.fatbin") == whole


def test_a_corrupted_lz4_block_decoded_into_a_file_is_bad_input(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    buf = bytearray(_lz4_fatbin((GOLDEN / "debug.fatbin").read_bytes()))
    entry = _first_entry(buf)
    header_size = struct.unpack_from("<I", buf, entry + 4)[0]
    # The block's first sequence made a match of no literals 65,535 bytes back, before
    # the start of the output: LZ4_decompress_safe refuses it.
    buf[entry + header_size : entry + header_size + 3] = b"\x00\xff\xff"
    monkeypatch.setattr(payloads, "LZ4_SPILL_BYTES", 0)
    with pytest.raises(BadInputError, match=r"x\.fatbin: fatbin entry at 0x10: corrupted LZ4"):
        read_buffer(bytes(buf), 0, len(buf), "x.fatbin")


def _container_of(buf: bytes, entries: list[fatbin.Entry]) -> bytes:
    """A fatbin container holding ``entries`` (copied from ``buf``), in order."""
    body = b"".join(buf[e.offset : e.offset + e.header_size + e.payload_size] for e in entries)
    return fatbin.CONTAINER_PREFIX + struct.pack("<Q", len(body)) + body


def _golden_entries() -> tuple[bytes, list[fatbin.Entry]]:
    buf = (GOLDEN / "libkernels.so").read_bytes()
    at = buf.find(fatbin.CONTAINER_PREFIX)
    first = fatbin.parse_container(buf, at, len(buf), "libkernels.so")
    second = fatbin.parse_container(buf, at + first.size, len(buf), "libkernels.so")
    return buf, [*first.entries, *second.entries]


def test_a_repeated_entry_is_decoded_once_and_a_same_sized_other_one_on_its_own(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # Libraries repeat entries (libcublasLt: 4,479 of 5,666): a payload is decoded once
    # for all its copies. An entry of the same header and size whose bytes differ (a
    # kernel renamed in place) is decoded on its own and keeps its own kernels.
    from gate.reader import decoding

    buf, entries = _golden_entries()
    cubin = entries[2]
    lo, hi = cubin.payload_offset, cubin.payload_offset + cubin.payload_size
    other = buf[:lo] + buf[lo:hi].replace(b"_Z5twicePi", b"_Z5thricPi") + buf[hi:]
    assert len(other) == len(buf)
    assert other != buf
    blob = _container_of(buf, [cubin, cubin]) + _container_of(other, [cubin])
    decoded: list[int] = []
    original = decoding.decode

    def counted(b: Any, e: fatbin.Entry, *args: Any) -> Any:
        decoded.append(e.offset)
        return original(b, e, *args)

    monkeypatch.setattr(decoding, "decode", counted)
    report = read_buffer(blob, 0, len(blob), "copies.fatbin")
    assert [sorted(e.kernels) for e in report.listing.entries] == [
        sorted(KERNELS), sorted(KERNELS),
        ["_Z11write_valuePi", "_Z5thricPi", "_Z7add_onePi"],
    ]  # fmt: skip
    assert len(decoded) == 2


def test_copies_are_found_when_other_fields_hash_alike() -> None:
    # Copies are grouped by their header fields' hash. Python hashes integers modulo
    # 2**61 - 1, so 64-bit flags 0x2001 and 0x2000 | 1 << 61 (both LZ4) hash alike: four
    # distinct payloads of the one must not use up the comparisons the other's copies
    # get, or each copy is decompressed again, charged again, and a read within the
    # artifact's bound fails.
    buf, entries = _golden_entries()
    lz4 = entries[3]
    assert lz4.compression == "lz4"
    raw = buf[lz4.offset : lz4.offset + lz4.header_size + lz4.payload_size]
    flags_at = 40  # the header's 64-bit flags (as _lz4_fatbin writes them)

    def flagged(flags: int, flip: int = 0) -> bytes:
        entry = bytearray(raw)
        struct.pack_into("<Q", entry, flags_at, flags)
        entry[lz4.header_size + lz4.compressed_size - 1] ^= flip  # a literal: still LZ4
        return bytes(entry)

    assert hash(0x2001) == hash(0x2000 | 1 << 61)
    body = b"".join([*(flagged(0x2001, k) for k in range(1, 5)), *[flagged(0x2000 | 1 << 61)] * 2])
    blob = fatbin.CONTAINER_PREFIX + struct.pack("<Q", len(body)) + body
    limits = Limits(artifact=lz4.uncompressed_size * 5)
    report = read_buffer(blob, 0, len(blob), "x.fatbin", limits=limits)
    assert len(report.listing.entries) == 6
    assert report.listing.entries[4].kernels == report.listing.entries[5].kernels != ()


def test_headers_only_reads_small_uncompressed_cubins_whole_to_tell_kernel_less_ones() -> None:
    # libkernels.so's first container holds nvcc's two kernel-less cubins (sm_80, sm_120),
    # as a library built from host code alone (libcufftw.so) holds nothing else. Headers
    # alone cannot tell them from code: a host ELF with only such cubins is read whole.
    buf, entries = _golden_entries()
    stubs, kernels = entries[:2], entries[2]
    assert [e.kind for e in (*stubs, kernels)] == [fatbin.KIND_ELF] * 3
    elf = elf_with_section(b".nv_fatbin", 0x2, _container_of(buf, stubs))
    report = read_buffer(elf, 0, len(elf), "libw.so", names=False)
    assert report.names
    assert [(str(e.target), e.kernels) for e in report.listing.entries] == [
        ("sm_80", ()), ("sm_120", ()),
    ]  # fmt: skip
    # A small cubin with kernels beside them: the headers-only report stands.
    mixed = elf_with_section(b".nv_fatbin", 0x2, _container_of(buf, [*stubs, kernels]))
    report = read_buffer(mixed, 0, len(mixed), "libk.so", names=False)
    assert not report.names
    assert all(e.kernels == () for e in report.listing.entries)
    # One that cannot be read whole leaves the headers-only report as it was, no error.
    broken = bytearray(elf)
    payload = elf.find(b"\x7fELF", 64)
    broken[payload : payload + 4] = b"\0\0\0\0"
    with pytest.raises(BadInputError):
        read_buffer(bytes(broken), 0, len(broken), "libw.so", names=True)
    report = read_buffer(bytes(broken), 0, len(broken), "libw.so", names=False)
    assert not report.names
    assert len(report.listing.entries) == 2
