"""The inspect stage: host format, hash, dependencies and device-code listings of an artifact.

Our own fatbin reader (gate.reader) is the primary inspector: it needs no toolkit and
sees ``f`` targets and containers outside ``.nv_fatbin``. Where cuobjdump is available
it runs too, as an independent cross-check: any disagreement on what cuobjdump can
show (kinds, archs, order, kernel names, PTX ISA) fails the gate, with both listings in
the evidence. Every listing is parsed for content (an empty listing, or PTX without
``.version``/``.target``, fails), never judged by a tool's exit status.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from gate import cuobjdump
from gate.errors import ToolError
from gate.evidence import EvidenceDir, sha256_file
from gate.machine import ld_cache
from gate.reader import read as reader
from gate.reader import summary as inspect_view
from gate.reader.hostelf import Dependency, HostFormat, dependencies, read_format
from gate.reader.listing import DeviceEntry, Kind, Listing
from gate.reader.targets import Capability, Target, Variant
from gate.stages.checks import Check

# Full SASS dumps cost minutes on real libraries (FATBIN.md): only below this size, or on request.
SASS_DUMP_LIMIT = 16 * 1024 * 1024


@dataclass(frozen=True)
class CrossCheck:
    """cuobjdump's view of the same artifact, and where it disagrees with ours."""

    tool: str
    listing: Listing
    disagreements: tuple[str, ...]


@dataclass(frozen=True)
class InspectedArtifact:
    """Everything the gate learned about one final artifact."""

    name: str
    path: Path
    sha256: str
    size: int
    host: HostFormat
    dependencies: tuple[Dependency, ...]
    listing: Listing
    inspector: str
    ptx_modules: tuple[cuobjdump.PtxText, ...]
    cross_check: CrossCheck | None = None
    cross_check_note: str = ""


@dataclass(frozen=True)
class LoadedRecord:
    """A shared library an entry point really loaded that carries device code."""

    path: Path
    sha256: str
    entry_points: tuple[str, ...]
    declared: bool
    listing: Listing
    evidence_prefix: str


def host_facts(path: Path) -> tuple[str, int, HostFormat, tuple[Dependency, ...]]:
    """SHA-256, size, host ELF format and resolved dependencies of ``path``."""
    fmt = read_format(path)
    return sha256_file(path), path.stat().st_size, fmt, dependencies(path, fmt, ld_cache())


def inspect_artifact(
    path: Path,
    evidence: EvidenceDir,
    *,
    prefix: str = "",
    dump_sass: str = "auto",
    devices: tuple[Capability, ...] = (),
    use_cuobjdump: bool = True,
) -> InspectedArtifact:
    """Inspect one artifact with our reader, cross-checked by cuobjdump where available."""
    digest, size, fmt, deps = host_facts(path)
    report = reader.read_artifact(path, names=True)
    view = inspect_view.artifact_json(report, devices)
    evidence.write_text(f"{prefix}device-code.txt", inspect_view.console(view))
    evidence.write_json(f"{prefix}device-code.json", {"version": 1, "artifact": view})
    try:
        tool = cuobjdump.find() if use_cuobjdump else None
        note = "cuobjdump cross-check not run: turned off with --no-cuobjdump"
    except ToolError as e:
        tool, note = None, f"cuobjdump cross-check not run: {e.one_line()}"
    cross: CrossCheck | None = None
    modules: tuple[cuobjdump.PtxText, ...] = ()
    if tool is None:
        evidence.write_text(f"{prefix}elf-list.txt", _our_list(report.listing))
    else:
        theirs, modules = _cuobjdump_listing(
            tool, path, evidence, prefix=prefix, dump_sass=dump_sass, size=size
        )
        tool_name = f"cuobjdump ({cuobjdump.version(tool)})"
        cross = CrossCheck(tool_name, theirs, compare(report.listing, theirs))
        note = ""
    return InspectedArtifact(
        name=path.name,
        path=path.resolve(),
        sha256=digest,
        size=size,
        host=fmt,
        dependencies=deps,
        listing=report.listing,
        inspector="cuda-gate reader",
        ptx_modules=modules,
        cross_check=cross,
        cross_check_note=note,
    )


def _our_list(listing: Listing) -> str:
    """An ELF/PTX list in cuobjdump's style, from our reader (when cuobjdump is absent)."""
    lines = []
    for kind, label in ((Kind.SASS, "ELF"), (Kind.PTX, "PTX")):
        for i, e in enumerate(listing.of_kind(kind), 1):
            lines.append(f"{label} file {i:>4}: {e.name or 'entry'}.{e.target.as_sass()}")
    return "\n".join(lines) + "\n"


def _cuobjdump_listing(
    tool: str, path: Path, evidence: EvidenceDir, *, prefix: str, dump_sass: str, size: int
) -> tuple[Listing, tuple[cuobjdump.PtxText, ...]]:
    elf_list = cuobjdump.run_tool(tool, ["--list-elf"], path)
    evidence.write_text(f"{prefix}elf-list.txt", elf_list.output())
    ptx_list = cuobjdump.run_tool(tool, ["--list-ptx"], path)
    evidence.write_text(f"{prefix}ptx-list.txt", ptx_list.output())
    symbols = cuobjdump.run_tool(tool, ["-symbols"], path)
    evidence.write_text(f"{prefix}symbols.txt", symbols.output())
    ptx = cuobjdump.run_tool(tool, ["--dump-ptx"], path)
    evidence.write_text(f"{prefix}ptx.txt", ptx.stdout)
    if dump_sass == "always" or (dump_sass == "auto" and size <= SASS_DUMP_LIMIT):
        try:
            sass = cuobjdump.run_tool(tool, ["--dump-sass"], path)
            evidence.write_text(f"{prefix}sass.txt", sass.stdout)
        except ToolError as e:
            # The listings above do not need nvdisasm; a full dump does. Say why it is absent.
            evidence.write_text(f"{prefix}sass-not-dumped.txt", e.one_line() + "\n")
    return cuobjdump.listing(symbols.stdout, ptx.stdout), tuple(
        cuobjdump.parse_ptx_dump(ptx.stdout)
    )


def _comparable(entry: DeviceEntry) -> tuple[str, str, str, tuple[str, ...]]:
    # cuobjdump names an sm_100f cubin sm_100: compare without the family suffix.
    target = entry.target
    if target.variant is Variant.FAMILY:
        target = Target(target.major, target.minor, Variant.NONE, virtual=target.virtual)
    isa = str(entry.ptx_isa) if entry.ptx_isa else "-"
    return entry.kind.value, str(target), isa, tuple(sorted(entry.kernels))


def compare(ours: Listing, theirs: Listing) -> tuple[str, ...]:
    """Where cuobjdump's listing and ours differ, in the sections cuobjdump reads."""
    sections = {e.section for e in ours.entries}
    primary = ".nv_fatbin" if ".nv_fatbin" in sections else "__nv_relfatbin"
    out: list[str] = []
    for kind in (Kind.SASS, Kind.PTX):
        mine = [_comparable(e) for e in ours.of_kind(kind) if e.section == primary]
        other = [_comparable(e) for e in theirs.of_kind(kind)]
        if len(mine) != len(other):
            out.append(f"{kind.value}: cuda-gate lists {len(mine)} entries, cuobjdump {len(other)}")
        for i, (a, b) in enumerate(zip(mine, other, strict=False), 1):
            if a[:2] != b[:2]:
                out.append(f"{kind.value} entry {i}: cuda-gate {a[1]}, cuobjdump {b[1]}")
            elif kind is Kind.PTX and a[2] != b[2] and b[2] != "-":
                out.append(f"{kind.value} entry {i} ({a[1]}): ISA {a[2]} vs cuobjdump {b[2]}")
            elif a[3] != b[3]:
                only_ours = sorted(set(a[3]) - set(b[3]))[:3]
                only_theirs = sorted(set(b[3]) - set(a[3]))[:3]
                out.append(
                    f"{kind.value} entry {i} ({a[1]}): kernels differ "
                    f"(only cuda-gate: {only_ours}; only cuobjdump: {only_theirs})"
                )
    return tuple(out)


def cross_check(artifact: InspectedArtifact) -> Check:
    """The cuobjdump cross-check as a check (skipped, with the reason, when it did not run)."""
    name = f"{artifact.name}: cuobjdump agrees with the cuda-gate reader"
    if artifact.cross_check is None:
        return Check(name, "gate.inspect", True, artifact.cross_check_note, skipped=True)
    issues = artifact.cross_check.disagreements
    return Check(
        name,
        "gate.inspect",
        not issues,
        f"{artifact.cross_check.tool}: same kinds, archs, order and kernel names"
        if not issues
        else "; ".join(issues[:5]) + (" ..." if len(issues) > 5 else ""),
    )


def content_checks(
    artifact: InspectedArtifact,
    evidence: EvidenceDir,
    host_arch: str,
    prefix: str = "",
    *,
    expect_device_code: bool = True,
) -> list[Check]:
    """Checks on what the listings contain: host machine, non-empty listings, PTX headers.

    An artifact that carries no device code by design (a host program that dlopens a
    kernel library) passes ``expect_device_code=False``: its listings are empty on purpose.
    """
    cls = "gate.inspect"
    name = artifact.name
    checks = [
        Check(
            f"{name}: host ELF machine",
            cls,
            artifact.host.matches_host(host_arch),
            f"{artifact.host.machine_text} matches host {host_arch}"
            if artifact.host.matches_host(host_arch)
            else f"{artifact.host.machine_text} does not run on host {host_arch}",
        )
    ]
    for file_name, what in (
        (
            ("elf-list.txt", "ELF listing"),
            ("ptx.txt", "PTX dump"),
            ("sass.txt", "SASS dump"),
        )
        if expect_device_code
        else ()
    ):
        path = evidence.path(prefix + file_name)
        if not path.exists():
            continue
        text = path.read_text(encoding="utf-8", errors="replace")
        empty = not text.strip() or "does not contain device code" in text
        if file_name == "elf-list.txt":
            empty = empty or not cuobjdump.parse_list(text, "ELF")
        checks.append(
            Check(
                f"{name}: {what} not empty",
                cls,
                not empty,
                f"{prefix}{file_name} has content"
                if not empty
                else f"{prefix}{file_name} is empty",
            )
        )
    for module in artifact.ptx_modules:
        missing = [
            label
            for label, ok in ((".version", module.version), (".target", module.target))
            if not ok
        ]
        checks.append(
            Check(
                f"{name}: PTX {module.arch} declares .version and .target",
                cls,
                not missing,
                f".version {module.version}, .target {module.target}, {len(module.entries)} entries"
                if not missing
                else f"PTX {module.arch} lacks {', '.join(missing)}",
            )
        )
    return checks
