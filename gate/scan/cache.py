"""A content-addressed cache of inspection reports: a library already read is not read again.

Keyed by the file's SHA-256, the reader's version and the mode (kernel names or headers
only; every section scanned or not; for names, with each entry's SHA-256 or without:
an entry kept without them answers only the readers that need none, one kept with them
answers every reader). The pipeline needs each artifact's SHA-256 for the
evidence anyway, so :func:`inspect_file` hashes the file once, looks the hash up, and
reads the file only on a miss::

    report, sha256, size = inspect_file(path, names=True)

Where: ``$CUDA_GATE_CACHE_DIR``, else ``$XDG_CACHE_HOME/cuda-gate``, else
``~/.cache/cuda-gate``. An entry that is corrupted, truncated, foreign or written by
another reader version is ignored and written again; entries are written atomically
(temporary file, then ``os.replace``), and a cache that cannot be written is skipped
without failing the inspection. Reports of files that could not be read are never kept.
"""

from __future__ import annotations

import hashlib
import json
import mmap
import os
import tempfile
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from gate import __version__
from gate.errors import BadInputError, ConfigError
from gate.reader import artifacts
from gate.reader.limits import Limits
from gate.reader.listing import DeviceEntry, Kind, Listing
from gate.reader.read import ArtifactReport, mapped, read_buffer
from gate.rules.targets import Target, Version
from gate.scan.threads import decoding_pool

FORMAT = "cuda-gate-inspection-cache"
# Bump when what the reader reports for the same bytes changes without a release.
# 2: trap stubs and empty kernels per cubin; 3: entry SHA-256; 4: kernel names by index;
# 5: a headers-only read of a host ELF holding only small raw cubins reads them whole;
# 6: a headers-only read names a flagless arch-specific cubin (nvFatbin's) by its 'a'
READER_FORMAT = 6
ENV_DIR = "CUDA_GATE_CACHE_DIR"
# Hashed this many bytes at a time, each piece's pages dropped after: a multiple of the
# page size, and what hashing adds to the peak (as the scan's pieces, fatbin._SCAN_CHUNK).
_HASH_STEP = 1 << 20
# A file's times tick with the kernel's coarse clock (a few ms): two writes within one
# tick can leave the same times. What was learnt of a file less than this after it last
# changed may not hold for its content later, so it is not kept, in the identities here
# or in a walk's memo (gate.scan.walkcache; git's index calls such a file "racily
# clean"); it is read again next time.
RACY_NS = 100_000_000


def cache_dir(environ: Mapping[str, str] | None = None) -> Path:
    """The cache folder: $CUDA_GATE_CACHE_DIR, $XDG_CACHE_HOME/cuda-gate or ~/.cache/cuda-gate."""
    env = os.environ if environ is None else environ
    if env.get(ENV_DIR):
        return Path(env[ENV_DIR])
    xdg = env.get("XDG_CACHE_HOME", "")
    # The XDG spec: a relative value is invalid and must be ignored.
    if xdg and Path(xdg).is_absolute():
        return Path(xdg) / "cuda-gate"
    home = env.get("HOME") or str(Path.home())
    return Path(home) / ".cache" / "cuda-gate"


def settled(st: os.stat_result, now: int | None = None) -> bool:
    """Whether a file with this stat last changed long enough before ``now`` (ns; default:
    the present) for what is learnt of it to be trusted later (RACY_NS)."""
    return max(st.st_mtime_ns, st.st_ctime_ns) < (time.time_ns() if now is None else now) - RACY_NS


def reader_version() -> str:
    """What identifies this reader in a cache entry."""
    return f"{__version__}+{READER_FORMAT}"


def inspect_file(
    path: str | os.PathLike[str],
    *,
    names: bool = True,
    scan: bool = True,
    limits: Limits | None = None,
    folder: Path | None = None,
    use_cache: bool = True,
    by_identity: bool = False,
    digests: bool = True,
    real: str | None = None,
) -> tuple[ArtifactReport, str, int]:
    """``(report, sha256, size)`` of one file, the report from the cache when it holds it.

    The file is mapped once: hashed, then read only on a miss. ``folder`` defaults to
    :func:`cache_dir`; ``use_cache=False`` reads and hashes without touching the cache.
    ``by_identity`` first looks the file up by its identity (:func:`cached_file`), so an
    unchanged file is neither read nor hashed, and remembers the identity's hash after a
    read; the evidence of a gate run, which must hash what it signs, leaves it off.
    ``digests=False`` reads without each entry's SHA-256 (gate.reader.read); ``real`` is
    the file's real path when the caller knows it (not resolved again).
    BadInputError (one line naming the file) when the file cannot be read.
    """
    display = artifacts.shown(path)
    root = folder or cache_dir()
    if use_cache and by_identity:
        known = cached_file(path, names=names, scan=scan, folder=root, digests=digests, real=real)
        if known is not None:
            return known
    resolved = _real(path, real) if use_cache and by_identity else None
    try:
        with artifacts.open_regular(path, display) as f:
            st = os.fstat(f.fileno())
            size = st.st_size
            if size == 0:
                raise BadInputError(f"{display}: empty file")
            with mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) as buf:
                digest = _sha256(buf)
                entry = _entry_path(root, digest, names, scan, digests)
                cached = (
                    _lookup(root, digest, size, names=names, scan=scan, digests=digests)
                    if use_cache
                    else None
                )
                if cached is not None:
                    report = renamed(cached, display)
                else:
                    report = read_buffer(
                        buf, 0, size, display, names=names, scan=scan, limits=limits,
                        digests=digests, threads=decoding_pool,
                    )  # fmt: skip
    except OSError as e:
        raise BadInputError(f"{display}: cannot read: {e.strerror or e}") from e
    if use_cache and report.error is None:
        if cached is None:
            store(entry, _document(report, digest, size, scan=scan, digests=digests))
        if resolved is not None and settled(st):
            identity = _identity_of(resolved, st)
            doc = {"format": FORMAT, "identity": identity, "sha256": digest, "size": size}
            store(_identity_path(root, identity), doc)
    return report, digest, size


# A file's identity, the way git's index trusts an unchanged file: its real path, device,
# inode, size, modification and change times. Any write changes the change time (which
# no user call can set back), so an identity never names two contents.
def _real(path: str | os.PathLike[str], known: str | None = None) -> str | None:
    if known is not None:
        return known
    try:
        return os.path.realpath(path)
    except (OSError, RuntimeError, ValueError):
        return None


def _identity_of(real: str | Path, st: os.stat_result) -> str:
    return _identity_text(real, st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns)


def _identity_text(real: str | Path, *fields: int) -> str:
    """The identity of the file at ``real`` with device, inode, size, modification and
    change times (ns) ``fields``."""
    return "\0".join([os.fspath(real), *map(str, fields)])


def identity(
    path: str | os.PathLike[str], real: str | None = None, *, only_settled: bool = False
) -> str | None:
    """The identity of the file at ``path`` now (see above; ``real``: its real path, when
    the caller knows it); None when it cannot be taken, or with ``only_settled`` when
    the file changed just now (RACY_NS: not to be kept)."""
    resolved = _real(path, real)
    if resolved is None:
        return None
    try:
        st = os.stat(resolved)  # noqa: PTH116  (once per file: no Path)
    except (OSError, ValueError):
        return None
    return None if only_settled and not settled(st) else _identity_of(resolved, st)


def _identity_path(folder: Path, identity: str) -> Path:
    return Path(_identity_file(os.fspath(folder), identity))


def _identity_file(folder: str, identity: str) -> str:
    # Text, not Path: a warm audit looks up tens of thousands of files.
    key = hashlib.sha256(identity.encode(errors="surrogateescape")).hexdigest()
    return f"{folder}/files/{key[:2]}/{key}.json"


def cached_file(
    path: str | os.PathLike[str],
    *,
    names: bool,
    scan: bool,
    folder: Path | None = None,
    digests: bool = True,
    real: str | None = None,
) -> tuple[ArtifactReport, str, int] | None:
    """``(report, sha256, size)`` of a file read before and unchanged since, from its
    identity alone (the file is neither opened nor hashed); None when not known."""
    known_as = identity(path, real)
    if known_as is None:
        return None
    root = folder or cache_dir()
    remembered = _remembered(root, known_as)
    if remembered is None:
        return None
    digest, size = remembered
    report = _lookup(root, digest, size, names=names, scan=scan, digests=digests)
    if report is None:
        return None
    return renamed(report, artifacts.shown(path)), digest, size


def _sha256(buf: mmap.mmap) -> str:
    """SHA-256 of the whole map, dropping each piece's pages once hashed (flat memory)."""
    h = hashlib.sha256()
    step = _HASH_STEP
    with memoryview(buf) as view:
        for lo in range(0, len(buf), step):
            h.update(view[lo : lo + step])  # hashlib releases the GIL for large pieces
            if hasattr(mmap, "MADV_DONTNEED") and lo + step < len(buf):
                buf.madvise(mmap.MADV_DONTNEED, lo, step)
    return h.hexdigest()


def mode_name(names: bool, scan: bool, digests: bool = True) -> str:
    """The mode as a cache file names it: ``names``, ``names-nodigest-noscan``, ``headers``.
    Without names no entry is hashed: ``digests`` makes no difference there."""
    digested = "" if digests or not names else "-nodigest"
    return ("names" if names else "headers") + digested + ("" if scan else "-noscan")


def _entry_path(folder: Path, digest: str, names: bool, scan: bool, digests: bool = True) -> Path:
    return Path(_entry_file(os.fspath(folder), digest, names, scan, digests))


def _entry_file(folder: str, digest: str, names: bool, scan: bool, digests: bool = True) -> str:
    # Text, not Path: a warm audit looks up tens of thousands of reports.
    return f"{folder}/{digest[:2]}/{digest}.{mode_name(names, scan, digests)}.json"


def _lookup(
    folder: Path, digest: str, size: int, *, names: bool, scan: bool, digests: bool
) -> ArtifactReport | None:
    """The cached report for a file's bytes in this mode; a reader that needs no entry
    digests takes one kept with them too."""
    where = os.fspath(folder)
    found = _load(
        _entry_file(where, digest, names, scan, digests),
        digest, size, names=names, scan=scan, digests=digests or not names,
    )  # fmt: skip
    if found is None and names and not digests:
        found = _load(_entry_file(where, digest, names, scan), digest, size, names=names, scan=scan)
    return found


def known_report(
    path: str | os.PathLike[str],
    digest: str,
    size: int,
    *,
    names: bool,
    scan: bool,
    digests: bool,
    folder: Path,
) -> ArtifactReport | None:
    """The report of a file whose SHA-256 and size a walk remembered for its unchanged
    identity (gate.scan.walkcache), under the file's name; None when not kept."""
    found = _lookup(folder, digest, size, names=names, scan=scan, digests=digests)
    return None if found is None else renamed(found, artifacts.shown(path))


def kept_report(path: str | os.PathLike[str], doc: dict[str, Any]) -> ArtifactReport | None:
    """A report kept by :func:`report_json` elsewhere (a walk's document), under the
    file's name; None when it does not parse."""
    try:
        return renamed(report_from_json(doc), artifacts.shown(path))
    except (ValueError, LookupError, TypeError, AttributeError, ConfigError):
        return None


def digest_of(real: str, fields: list[int], folder: Path) -> str | None:
    """The SHA-256 the cache remembers for the file of this real path and identity
    ``fields`` (as :func:`_identity_text` takes them), or None."""
    remembered = _remembered(folder, _identity_text(real, *fields))
    return None if remembered is None else remembered[0]


def _remembered(folder: Path, identity: str) -> tuple[str, int] | None:
    """The SHA-256 and size an identity document keeps, or None (missing, corrupted)."""
    try:
        with open(_identity_file(os.fspath(folder), identity), "rb") as f:  # noqa: PTH123
            doc = json.loads(f.read())
        if doc["format"] != FORMAT or doc["identity"] != identity:
            return None
        digest, size = doc["sha256"], doc["size"]
    except (OSError, ValueError, LookupError, TypeError):
        return None
    return (digest, size) if isinstance(digest, str) and isinstance(size, int) else None


def renamed(report: ArtifactReport, display: str) -> ArtifactReport:
    """The cached report under the name this file was given now."""
    return ArtifactReport(
        display, report.format, report.elf_class, report.machine, report.listing, report.names
    )


def _load(
    entry: str | Path, digest: str, size: int, *, names: bool, scan: bool, digests: bool = True
) -> ArtifactReport | None:
    """The cached report, or None for a missing, corrupted, foreign or other-version entry."""
    try:
        with open(entry, "rb") as f:  # noqa: PTH123
            doc = json.loads(f.read())
        if (
            doc["format"] != FORMAT
            or doc["reader"] != reader_version()
            or doc["sha256"] != digest
            or doc["size"] != size
            or doc["names"] is not names
            or doc["scan"] is not scan
            or doc.get("digests", True) is not digests
        ):
            return None
        return report_from_json(doc["report"])
    except (OSError, ValueError, LookupError, TypeError, AttributeError, ConfigError):
        # Unreadable, not JSON, fields missing or mistyped, values that do not parse:
        # a cache entry is only ever a shortcut, so any doubt means reading the file.
        return None


def store(entry: Path, doc: dict[str, Any]) -> None:
    """Write ``doc`` at ``entry`` atomically; a cache that cannot be written is skipped."""
    try:
        entry.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=entry.parent, prefix=f".{entry.name}.", suffix=".tmp")
        try:
            with os.fdopen(fd, "w", encoding="utf-8") as f:
                json.dump(doc, f, separators=(",", ":"))
            Path(tmp).replace(entry)
        except BaseException:
            Path(tmp).unlink(missing_ok=True)
            raise
    except OSError:
        return


def _document(
    report: ArtifactReport, digest: str, size: int, *, scan: bool, digests: bool = True
) -> dict[str, Any]:
    return {
        "format": FORMAT,
        "reader": reader_version(),
        "sha256": digest,
        "size": size,
        "names": report.names,
        "scan": scan,
        "digests": digests or not report.names,
        "report": report_json(report),
    }


def report_json(report: ArtifactReport) -> dict[str, Any]:
    """A report as kept in the cache (its path left out: the same bytes have many).

    Kernel names are kept once each, in ``kernel_names``, and named by their index there:
    a library repeats each kernel in every target's entry (libtorch_cuda.so: 144,640
    names, 23,021 distinct), and reading them back was most of a warm re-audit.
    """
    table: dict[str, int] = {}

    def indices(names: tuple[str, ...]) -> list[int]:
        return [table.setdefault(k, len(table)) for k in names]

    entries = [_entry_json(e, indices) for e in report.listing.entries]
    return {
        "format": report.format,
        "elf_class": report.elf_class,
        "machine": report.machine,
        "names": report.names,
        "kernel_names": list(table),
        "entries": entries,
    }


def _entry_json(e: DeviceEntry, indices: Callable[[tuple[str, ...]], list[int]]) -> list[Any]:
    # A list, not an object: libraries hold thousands of entries.
    return [
        e.kind.value,
        str(e.target),
        indices(e.kernels),
        str(e.ptx_isa) if e.ptx_isa else None,
        e.section,
        e.compression,
        e.stored_size,
        e.size,
        e.producer,
        e.debug,
        e.name,
        indices(e.traps),
        indices(e.empty),
        e.sha256,
    ]


# Target and ISA texts parsed once per process (a warm audit loads 16,000 reports that
# name a few dozen targets between them); both kinds are immutable.
_TARGETS: dict[str, Target] = {}
_VERSIONS: dict[str, Version] = {}
_PARSED_MAX = 4096
_KINDS = {kind.value: kind for kind in Kind}  # an unknown kind is a KeyError: entry ignored


def clear_parsed() -> None:
    """Forget the target and ISA texts parsed so far (the tests' isolation)."""
    _TARGETS.clear()
    _VERSIONS.clear()


def report_from_json(doc: dict[str, Any]) -> ArtifactReport:
    """A report kept by :func:`report_json`, its path empty; raises on anything malformed."""
    # Entries repeat a few kinds, targets and ISAs thousands of times (torch's libraries:
    # 40,000 entries): each text is parsed once, and an empty kernel list costs nothing.
    if len(_TARGETS) + len(_VERSIONS) > _PARSED_MAX:  # bounded, whatever the cache holds
        clear_parsed()
    targets, versions = _TARGETS, _VERSIONS
    table = doc["kernel_names"]
    if not isinstance(table, list) or not all(isinstance(k, str) for k in table):
        raise TypeError("kernel names must be strings")

    def named(indices: list[int]) -> tuple[str, ...]:
        # An index out of the table, or not an int, raises (IndexError, TypeError).
        if indices and min(indices) < 0:
            raise IndexError("a kernel name's index is negative")
        return tuple([table[i] for i in indices])

    entries = []
    for row in doc["entries"]:
        (kind, target, kernels, isa, section, compression, stored, size, producer, debug, name,
         traps, empty, digest) = row  # fmt: skip
        parsed = targets.get(target)
        if parsed is None:
            parsed = targets[target] = Target.parse(target)
        if isa is not None:
            version = versions.get(isa)
            if version is None:
                version = versions[isa] = Version.parse(isa)
        else:
            version = None
        entries.append(
            DeviceEntry(
                _KINDS[kind],
                parsed,
                named(kernels) if kernels else (),
                version,
                str(section),
                str(compression),
                int(stored),
                int(size),
                producer if producer is None else str(producer),
                bool(debug),
                name if name is None else str(name),
                named(traps) if traps else (),
                named(empty) if empty else (),
                str(digest),
            )
        )
    elf_class = doc["elf_class"]
    if elf_class not in (None, 32, 64):
        raise ValueError("ELF class")
    return ArtifactReport(
        "",
        str(doc["format"]),
        elf_class,
        doc["machine"] if doc["machine"] is None else str(doc["machine"]),
        Listing(tuple(entries)),
        bool(doc["names"]),
    )


def loaded_library(
    path: str | os.PathLike[str],
    *,
    use_cache: bool = True,
    folder: Path | None = None,
) -> tuple[ArtifactReport, str | None]:
    """A loaded library's headers-only report, and its SHA-256 when it has device code.

    A program loads the same vendor libraries run after run (torch loads a hundred,
    2.5 GB of them): what was found is remembered by the file's identity (real path,
    device, inode, size, modification and change times, the way git's index trusts
    an unchanged file) and by this reader's version, so a warm run neither scans nor
    hashes them again. Any change to the file changes its change time, hence the key;
    ``use_cache=False`` reads and hashes every byte. A library without device code is
    not hashed (None). BadInputError when the file cannot be read.
    """
    display = artifacts.shown(path)
    try:
        real = Path(path).resolve()
        st = real.stat()
    except OSError as e:
        raise BadInputError(f"{display}: cannot read: {e.strerror or e}") from e
    identity = _identity_of(real, st)
    key = hashlib.sha256(
        f"{reader_version()}\0{identity}".encode(errors="surrogateescape")
    ).hexdigest()
    entry = (folder or cache_dir()) / "loaded" / key[:2] / f"{key}.json"
    if use_cache:
        known = _load_loaded(entry, identity)
        if known is not None:
            return renamed(known[0], display), known[1]
    digest = None
    with mapped(path) as buf:
        report = read_buffer(
            buf, 0, len(buf), display, names=False, scan=True, threads=decoding_pool
        )
        if report.listing.entries:
            digest = _sha256(buf)
    if use_cache and report.error is None and settled(st):
        doc = _document(report, digest or "", st.st_size, scan=True)
        store(entry, {**doc, "identity": identity, "sha256": digest})
    return report, digest


def _load_loaded(entry: Path, identity: str) -> tuple[ArtifactReport, str | None] | None:
    """A remembered loaded library, or None for a missing, corrupted or foreign entry."""
    try:
        doc = json.loads(entry.read_bytes())
        if doc["format"] != FORMAT or doc["reader"] != reader_version():
            return None
        digest = doc["sha256"]
        if doc["identity"] != identity or not (digest is None or isinstance(digest, str)):
            return None
        return report_from_json(doc["report"]), digest
    except (OSError, ValueError, LookupError, TypeError, AttributeError, ConfigError):
        return None
