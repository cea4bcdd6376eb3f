"""The inspect stage: host format, hash, dependencies and device-code listings of an artifact.

Listings come from cuobjdump here; every listing is parsed for content (a listing
that is empty, or PTX without ``.version``/``.target``/the entry, fails), never
judged by the tool's exit status.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from gate import cuobjdump
from gate.checks import Check
from gate.evidence import EvidenceDir, sha256_file
from gate.hostelf import Dependency, HostFormat, dependencies, read_format
from gate.listing import Listing

# Full SASS dumps cost minutes on real libraries (FATBIN.md): only below this size, or on request.
SASS_DUMP_LIMIT = 16 * 1024 * 1024


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


def host_facts(path: Path) -> tuple[str, int, HostFormat, tuple[Dependency, ...]]:
    """SHA-256, size, host ELF format and resolved dependencies of ``path``."""
    fmt = read_format(path)
    return sha256_file(path), path.stat().st_size, fmt, dependencies(path, fmt)


def inspect_artifact(
    path: Path, evidence: EvidenceDir, *, prefix: str = "", dump_sass: str = "auto"
) -> InspectedArtifact:
    """Inspect one artifact with cuobjdump, writing its listings to the evidence folder."""
    digest, size, fmt, deps = host_facts(path)
    tool = cuobjdump.find()
    elf_list = cuobjdump.run_tool(tool, ["--list-elf"], path)
    evidence.write_text(f"{prefix}elf-list.txt", elf_list.output())
    ptx_list = cuobjdump.run_tool(tool, ["--list-ptx"], path)
    evidence.write_text(f"{prefix}ptx-list.txt", ptx_list.output())
    symbols = cuobjdump.run_tool(tool, ["-symbols"], path)
    evidence.write_text(f"{prefix}symbols.txt", symbols.output())
    ptx = cuobjdump.run_tool(tool, ["--dump-ptx"], path)
    evidence.write_text(f"{prefix}ptx.txt", ptx.stdout)
    if dump_sass == "always" or (dump_sass == "auto" and size <= SASS_DUMP_LIMIT):
        sass = cuobjdump.run_tool(tool, ["--dump-sass"], path)
        evidence.write_text(f"{prefix}sass.txt", sass.stdout)
    listing = cuobjdump.listing(symbols.stdout, ptx.stdout)
    return InspectedArtifact(
        name=path.name,
        path=path.resolve(),
        sha256=digest,
        size=size,
        host=fmt,
        dependencies=deps,
        listing=listing,
        inspector=f"cuobjdump ({cuobjdump.version(tool)})",
        ptx_modules=tuple(cuobjdump.parse_ptx_dump(ptx.stdout)),
    )


def content_checks(
    artifact: InspectedArtifact, evidence: EvidenceDir, host_arch: str, prefix: str = ""
) -> list[Check]:
    """Checks on what the listings contain: host machine, non-empty listings, PTX headers."""
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
        ("elf-list.txt", "ELF listing"),
        ("ptx.txt", "PTX dump"),
        ("sass.txt", "SASS dump"),
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
