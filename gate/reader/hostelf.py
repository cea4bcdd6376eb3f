"""Host-side facts of a final artifact: ELF format and machine, and its dynamic dependencies.

``file``'s answer, computed ourselves (the tool may be absent), checked against the
host architecture; DT_NEEDED entries resolved the way ld.so does: RPATH (when there
is no RUNPATH), LD_LIBRARY_PATH, RUNPATH, the ld.so cache, then the default folders.
"""

from __future__ import annotations

import mmap
import os
import re
import struct
from collections import deque
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from gate.errors import BadInputError
from gate.reader.elffile import ElfFile

# uname -m -> the ELF e_machine that runs there, and how `file` prints it.
HOST_MACHINES = {
    "x86_64": (62, "x86-64"),
    "aarch64": (183, "ARM aarch64"),
    "arm64": (183, "ARM aarch64"),
    "ppc64le": (21, "64-bit PowerPC or cisco 7500"),
}
_MACHINE_TEXT = dict(HOST_MACHINES.values())
_DEFAULT_DIRS = ("/lib", "/usr/lib", "/lib64", "/usr/lib64")
_LDCONFIG_RE = re.compile(r"^\s*(\S+)\s+\(([^)]*)\)\s+=>\s+(\S+)\s*$", re.MULTILINE)
# (soname, flags) -> path, as `ldconfig -p` lists the loader's cache (gate.system.machine.ld_cache).
LdCache = Mapping[tuple[str, str], str]
# e_machine -> the ABI word `ldconfig -p` prints for it.
_CACHE_ABI = {62: "x86-64", 183: "AArch64", 21: "64bit"}
_ELF_TYPES = {1: "relocatable", 2: "executable", 3: "shared object"}
_SHT_DYNAMIC = 6
_DT_NEEDED, _DT_RPATH, _DT_RUNPATH, _DT_FLAGS_1 = 1, 15, 29, 0x6FFFFFFB
_DF_1_PIE = 0x08000000


@dataclass(frozen=True)
class Dependency:
    """One DT_NEEDED entry, who needs it, and where it resolves (None: not found)."""

    name: str
    needed_by: str
    resolved: str | None


@dataclass(frozen=True)
class HostFormat:
    """The host-side ELF facts of one file."""

    description: str
    elf_class: int
    machine: int
    machine_text: str
    elf_type: str
    interpreter: str | None
    needed: tuple[str, ...]
    rpath: tuple[str, ...]
    runpath: tuple[str, ...]

    def matches_host(self, arch: str) -> bool:
        """Whether this file's ELF machine is the one the host ``arch`` runs."""
        expected = HOST_MACHINES.get(arch)
        return expected is not None and expected[0] == self.machine


def read_format(path: Path) -> HostFormat:
    """Parse the host ELF header and dynamic section; BadInputError for non-ELF files."""
    try:
        with path.open("rb") as handle:
            if os.fstat(handle.fileno()).st_size == 0:
                raise BadInputError(f"{path}: empty file, not an ELF file")
            with mmap.mmap(handle.fileno(), 0, access=mmap.ACCESS_READ) as buf:
                return _format(ElfFile(buf, str(path)), path)
    except OSError as e:
        raise BadInputError(f"{path}: cannot read: {e.strerror or e}") from e


def _format(elf: ElfFile, path: Path) -> HostFormat:
    interp_section = elf.section(".interp")
    interp = elf.data(interp_section).rstrip(b"\0").decode() if interp_section else None
    needed, rpath, runpath, flags_1 = _dynamic(elf)
    kind = _ELF_TYPES.get(elf.type, f"type {elf.type}")
    if elf.type == 3 and flags_1 & _DF_1_PIE:  # as `file` decides: libc has an interpreter too
        kind = "pie executable"
    machine_text = _MACHINE_TEXT.get(elf.machine, elf.machine_name)
    parts = [
        f"ELF {elf.elf_class}-bit {'LSB' if elf.little_endian else 'MSB'} {kind}",
        machine_text,
        "dynamically linked" if (needed or interp) else "statically linked",
    ]
    if interp:
        parts.append(f"interpreter {interp}")
    parts.append("not stripped" if elf.section(".symtab") else "stripped")
    return HostFormat(
        description=f"{path.name}: " + ", ".join(parts),
        elf_class=elf.elf_class,
        machine=elf.machine,
        machine_text=machine_text,
        elf_type=kind,
        interpreter=interp,
        needed=tuple(needed),
        rpath=tuple(p for p in rpath if p),
        runpath=tuple(p for p in runpath if p),
    )


def _dynamic(elf: ElfFile) -> tuple[list[str], list[str], list[str], int]:
    """DT_NEEDED, DT_RPATH, DT_RUNPATH strings and DT_FLAGS_1 from the SHT_DYNAMIC section."""
    needed: list[str] = []
    rpath: list[str] = []
    runpath: list[str] = []
    flags_1 = 0
    section = next((s for s in elf.sections if s.type == _SHT_DYNAMIC), None)
    if section is None:
        return needed, rpath, runpath, flags_1
    if not 0 < section.link < len(elf.sections):
        raise BadInputError(f"{elf.name}: corrupted dynamic section (no string table)")
    strings = elf.data(elf.sections[section.link])
    endian = "<" if elf.little_endian else ">"
    layout = struct.Struct(f"{endian}qQ" if elf.elf_class == 64 else f"{endian}iI")
    for tag, value in layout.iter_unpack(
        elf.data(section)[: section.size // layout.size * layout.size]
    ):
        if tag == 0:  # DT_NULL ends the table
            break
        if tag == _DT_FLAGS_1:
            flags_1 = value
        if tag in (_DT_NEEDED, _DT_RPATH, _DT_RUNPATH):
            end = strings.find(b"\0", value)
            text = strings[value : end if end >= 0 else len(strings)].decode("utf-8", "replace")
            if tag == _DT_NEEDED:
                needed.append(text)
            else:
                (rpath if tag == _DT_RPATH else runpath).extend(text.split(":"))
    return needed, rpath, runpath, flags_1


def parse_ld_cache(text: str) -> dict[tuple[str, str], str]:
    """``(soname, flags) -> path`` from the output of `ldconfig -p`."""
    out: dict[tuple[str, str], str] = {}
    for name, flags, target in _LDCONFIG_RE.findall(text):
        out.setdefault((name, flags), target)
    return out


def _from_cache(name: str, machine: int, ld_cache: LdCache) -> str | None:
    abi = _CACHE_ABI.get(machine, "")
    for (soname, flags), target in ld_cache.items():
        if soname == name and abi in flags:
            return target
    return None


def _expand(entry: str, origin: Path) -> Path:
    return Path(entry.replace("$ORIGIN", str(origin)).replace("${ORIGIN}", str(origin)))


def resolve(name: str, fmt: HostFormat, origin: Path, ld_cache: LdCache) -> str | None:
    """Where ld.so would find ``name`` for an object with ``fmt`` living in ``origin``."""
    if "/" in name:
        return name if Path(name).exists() else None
    search: list[Path] = []
    if not fmt.runpath:
        search += [_expand(p, origin) for p in fmt.rpath]
    search += [Path(p) for p in os.environ.get("LD_LIBRARY_PATH", "").split(":") if p]
    search += [_expand(p, origin) for p in fmt.runpath]
    for folder in search:
        if (folder / name).is_file():
            return str((folder / name).resolve())
    cached = _from_cache(name, fmt.machine, ld_cache)
    if cached:
        return cached
    for default in _DEFAULT_DIRS:
        if (Path(default) / name).is_file():
            return str(Path(default) / name)
    return None


def dependencies(path: Path, fmt: HostFormat, ld_cache: LdCache) -> tuple[Dependency, ...]:
    """Every DT_NEEDED, transitively, each with where it resolves (breadth first)."""
    out: list[Dependency] = []
    seen: set[str] = set()
    queue: deque[tuple[Path, HostFormat]] = deque([(path, fmt)])
    while queue:
        current, current_fmt = queue.popleft()
        for name in current_fmt.needed:
            if name in seen:
                continue
            seen.add(name)
            found = resolve(name, current_fmt, current.parent, ld_cache)
            out.append(Dependency(name, current.name, found))
            if found:
                try:
                    queue.append((Path(found), read_format(Path(found))))
                except BadInputError:
                    continue
    return tuple(out)
