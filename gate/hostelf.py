"""Host-side facts of a final artifact: ELF format and machine, and its dynamic dependencies.

``file``'s answer, computed ourselves (the tool may be absent), checked against the
host architecture; DT_NEEDED entries resolved the way ld.so does: RPATH (when there
is no RUNPATH), LD_LIBRARY_PATH, RUNPATH, the ld.so cache, then the default folders.
"""

from __future__ import annotations

import os
import re
from collections import deque
from dataclasses import dataclass
from functools import cache
from pathlib import Path

from elftools.common.exceptions import ELFError
from elftools.elf.dynamic import DynamicSection
from elftools.elf.elffile import ELFFile

from gate import proc
from gate.errors import BadInputError, ToolError

# uname -m -> the ELF e_machine names pyelftools reports, and how `file` prints them.
HOST_MACHINES = {
    "x86_64": ("EM_X86_64", "x86-64"),
    "aarch64": ("EM_AARCH64", "ARM aarch64"),
    "arm64": ("EM_AARCH64", "ARM aarch64"),
    "ppc64le": ("EM_PPC64", "64-bit PowerPC or cisco 7500"),
}
_MACHINE_TEXT = dict(HOST_MACHINES.values())
_DEFAULT_DIRS = ("/lib", "/usr/lib", "/lib64", "/usr/lib64")
_LDCONFIG_RE = re.compile(r"^\s*(\S+)\s+\(([^)]*)\)\s+=>\s+(\S+)\s*$", re.MULTILINE)
_CACHE_ABI = {"EM_X86_64": "x86-64", "EM_AARCH64": "AArch64", "EM_PPC64": "64bit"}


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
    machine: str
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
            elf = ELFFile(handle)
            return _format(elf, path)
    except OSError as e:
        raise BadInputError(f"{path}: cannot read: {e.strerror}") from e
    except (ELFError, ValueError, KeyError, IndexError) as e:
        raise BadInputError(f"{path}: not a readable ELF file: {e}") from e


def _format(elf: ELFFile, path: Path) -> HostFormat:
    machine = str(elf["e_machine"])
    elf_type = str(elf["e_type"])
    interp = None
    needed: list[str] = []
    rpath: list[str] = []
    runpath: list[str] = []
    for segment in elf.iter_segments():
        if segment["p_type"] == "PT_INTERP":
            interp = str(getattr(segment, "get_interp_name", lambda: "")())
    for section in elf.iter_sections():
        if isinstance(section, DynamicSection):
            for tag in section.iter_tags():
                # pyelftools sets these attributes per tag type at run time.
                if tag.entry.d_tag == "DT_NEEDED":
                    needed.append(str(getattr(tag, "needed", "")))
                elif tag.entry.d_tag == "DT_RPATH":
                    rpath += str(getattr(tag, "rpath", "")).split(":")
                elif tag.entry.d_tag == "DT_RUNPATH":
                    runpath += str(getattr(tag, "runpath", "")).split(":")
    kind = {
        "ET_EXEC": "executable",
        "ET_DYN": "pie executable" if interp else "shared object",
        "ET_REL": "relocatable",
    }.get(elf_type, elf_type)
    machine_text = _MACHINE_TEXT.get(machine, machine.removeprefix("EM_"))
    parts = [
        f"ELF {elf.elfclass}-bit {'LSB' if elf.little_endian else 'MSB'} {kind}",
        machine_text,
        "dynamically linked" if (needed or interp) else "statically linked",
    ]
    if interp:
        parts.append(f"interpreter {interp}")
    parts.append("not stripped" if elf.get_section_by_name(".symtab") else "stripped")
    return HostFormat(
        description=f"{path.name}: " + ", ".join(parts),
        elf_class=elf.elfclass,
        machine=machine,
        machine_text=machine_text,
        elf_type=elf_type,
        interpreter=interp,
        needed=tuple(needed),
        rpath=tuple(p for p in rpath if p),
        runpath=tuple(p for p in runpath if p),
    )


@cache
def _ld_cache() -> dict[tuple[str, str], str]:
    """(soname, abi) -> path from `ldconfig -p`; empty when ldconfig is unavailable."""
    try:
        tool = proc.which("ldconfig", extra_dirs=["/sbin", "/usr/sbin"])
    except ToolError:
        return {}
    result = proc.run([tool, "-p"], timeout=60)
    out: dict[tuple[str, str], str] = {}
    for name, flags, target in _LDCONFIG_RE.findall(result.stdout):
        out.setdefault((name, flags), target)
    return out


def _from_cache(name: str, machine: str) -> str | None:
    abi = _CACHE_ABI.get(machine, "")
    for (soname, flags), target in _ld_cache().items():
        if soname == name and abi in flags:
            return target
    return None


def _expand(entry: str, origin: Path) -> Path:
    return Path(entry.replace("$ORIGIN", str(origin)).replace("${ORIGIN}", str(origin)))


def resolve(name: str, fmt: HostFormat, origin: Path) -> str | None:
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
    cached = _from_cache(name, fmt.machine)
    if cached:
        return cached
    for default in _DEFAULT_DIRS:
        if (Path(default) / name).is_file():
            return str(Path(default) / name)
    return None


def dependencies(path: Path, fmt: HostFormat) -> tuple[Dependency, ...]:
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
            found = resolve(name, current_fmt, current.parent)
            out.append(Dependency(name, current.name, found))
            if found:
                try:
                    queue.append((Path(found), read_format(Path(found))))
                except BadInputError:
                    continue
    return tuple(out)
