"""What to do next, for each cause the rules know: one line a person can act on.

A failed check says what is wrong; its remedy says what to change, in the terms of the
project's own build: the variable that carries the architecture list
(:class:`ArchList`), the driver version a PTX image needs, the kernels an artifact holds
when the one asked for is missing, the distribution that ships a library without code
for the device. The facts come from the run (:class:`Situation`); this module only
words what to do with them. A cause with nothing more to say than its failure has no
remedy (None).
"""

from __future__ import annotations

import difflib
import enum
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from gate.rules.causes import Cause
from gate.rules.targets import Capability, Target, Version


class ArchList(enum.Enum):
    """Where a project's build names the GPU architectures it compiles for."""

    GENCODE = "gencode"  # cuda-gate's {gencode} placeholder, filled from --sass/--ptx
    CMAKE = "cmake"  # CMAKE_CUDA_ARCHITECTURES (or the CUDA_ARCHITECTURES property)
    TORCH = "torch"  # TORCH_CUDA_ARCH_LIST, read by torch.utils.cpp_extension
    NVCC = "nvcc"  # -gencode / -arch flags written into the build's own nvcc commands
    UNKNOWN = "unknown"


def arch_list_of(commands: Sequence[str], *, gencode_placeholder: bool = False) -> ArchList:
    """Which variable carries the architecture list, from the build's command lines (and
    whether the configuration used ``{gencode}``): CMake, then torch, then plain nvcc flags
    (``-arch`` also stands for ``--gpu-architecture``)."""
    if gencode_placeholder:
        return ArchList.GENCODE
    if any("CMAKE_CUDA_ARCHITECTURES" in c or _runs(c, "cmake") for c in commands):
        return ArchList.CMAKE
    if any("TORCH_CUDA_ARCH_LIST" in c or "torch" in c for c in commands):
        return ArchList.TORCH
    if any(flag in c for c in commands for flag in ("-gencode", "--generate-code", "-arch")):
        return ArchList.NVCC
    return ArchList.UNKNOWN


def _runs(command: str, tool: str) -> bool:
    """``command``'s program is ``tool`` (a path to it included)."""
    words = command.split()
    return bool(words) and (words[0] == tool or words[0].endswith(f"/{tool}"))


def add_sass(arch: ArchList, target: Target) -> str:
    """How to add native code for ``target`` in the project's own terms."""
    sass = target.as_sass()
    number = f"{sass.number}{sass.variant.value}"
    if arch is ArchList.CMAKE:
        return (
            f'add {number} to CMAKE_CUDA_ARCHITECTURES (e.g. -DCMAKE_CUDA_ARCHITECTURES="{number}")'
        )
    if arch is ArchList.TORCH:
        cap = sass.capability
        return f"add {cap.major}.{cap.minor}{sass.variant.value} to TORCH_CUDA_ARCH_LIST"
    if arch is ArchList.GENCODE:
        return f"put {{gencode}} in every nvcc command (it carries {sass})"
    return f"add -gencode arch={sass.as_ptx()},code={sass} to the nvcc commands"


def add_ptx(arch: ArchList, target: Target) -> str:
    """How to add PTX for ``target`` (JIT-compiled on newer devices) in the project's terms."""
    ptx = target.as_ptx()
    number = f"{ptx.number}{ptx.variant.value}"
    if arch is ArchList.CMAKE:
        return f"add {number}-virtual to CMAKE_CUDA_ARCHITECTURES"
    if arch is ArchList.TORCH:
        cap = ptx.capability
        return (
            f"add +PTX to the last entry of TORCH_CUDA_ARCH_LIST (e.g. {cap.major}.{cap.minor}+PTX)"
        )
    if arch is ArchList.GENCODE:
        return f"put {{gencode}} in every nvcc command (it carries {ptx})"
    return f"add -gencode arch={ptx},code={ptx} to the nvcc commands"


def add_both(arch: ArchList, target: Target) -> str:
    """How to add native code and PTX for ``target`` at once, in the project's terms."""
    sass, ptx = target.as_sass(), target.as_ptx()
    number = f"{sass.number}{sass.variant.value}"
    if arch is ArchList.CMAKE:
        example = f'-DCMAKE_CUDA_ARCHITECTURES="{number}"'
        return f"add {number} (SASS and PTX) to CMAKE_CUDA_ARCHITECTURES (e.g. {example})"
    if arch is ArchList.TORCH:
        cap = sass.capability
        return f"add {cap.major}.{cap.minor}{sass.variant.value}+PTX to TORCH_CUDA_ARCH_LIST"
    if arch is ArchList.GENCODE:
        return f"put {{gencode}} in every nvcc command (it carries {sass} and {ptx})"
    return f"add -gencode arch={ptx},code=[{sass},{ptx}] to the nvcc commands"


@dataclass(frozen=True)
class Situation:
    """What the run knows around one failure; every field but the cause may be unknown."""

    cause: Cause
    arch: ArchList = ArchList.UNKNOWN
    device: Capability | None = None  # the device the code must run on
    target: Target | None = None  # the target named with --target, where no device is
    driver: Version | None = None  # the driver's CUDA version
    driver_needed: Version | None = None  # what the PTX image needs (from its ISA)
    kernel: str | None = None  # the kernel that was asked for and is missing
    kernels: tuple[str, ...] = ()  # the kernels the artifacts hold
    library: str | None = None  # the library without code for the device
    distribution: str | None = None  # the installed distribution that ships it
    host: str | None = None  # the device host's machine (aarch64) where it is not this one
    ptx_too: bool = False  # native code missing, and PTX for the same target too


def remedy(s: Situation) -> str | None:
    """The one line that says what to do about ``s.cause``, or None."""
    wanted = s.target or (s.device.sm() if s.device is not None else None)
    said = _SAY.get(s.cause)
    return said(s, wanted) if said is not None else _OTHER.get(s.cause)


def _code_line(s: Situation, wanted: Target | None) -> str | None:
    """No native code for the device: where the architecture list lives."""
    if wanted is None:
        return None
    added = add_both(s.arch, wanted) if s.ptx_too else add_sass(s.arch, wanted)
    return f"{added}{_REBUILD}"


def _ptx_line(s: Situation, wanted: Target | None) -> str | None:
    """No PTX to JIT-compile (or the native path needed the JIT)."""
    return f"{add_ptx(s.arch, wanted)}{_REBUILD}" if wanted is not None else None


def _stub_line(s: Situation, wanted: Target | None) -> str | None:
    """A kernel whose code for the device is a stub that traps."""
    if wanted is None:
        return None
    return (
        f"the kernel is a stub that traps on {wanted.as_sass()}: {add_sass(s.arch, wanted)} "
        "so the library carries its real code, and rebuild"
    )


def _host_line(s: Situation, _wanted: Target | None) -> str | None:
    """Host code for another machine than the device's host."""
    if s.host is None:
        return None
    return f"build on (or cross-compile for) {s.host}, the device host's machine"


def _old_driver_line(s: Situation, _wanted: Target | None) -> str | None:
    """A runtime newer than the driver."""
    if s.driver is None:
        return None
    return (
        f"the driver supports CUDA {s.driver}: update it, or build with a toolkit "
        f"no newer than CUDA {s.driver}"
    )


_REBUILD = ", rebuild, and check the final link keeps it"

_OTHER = {
    Cause.TIMEOUT: "raise the entry point's timeout in cuda-gate.toml, or find why it hangs",
    Cause.STALE_ARTIFACT: (
        "the build did not write this file: check that a build step produces it and that "
        "the artifact path names the output"
    ),
    Cause.JIT_CACHE: (
        "the program wrote the JIT cache: code it needed was JIT-compiled; add SASS for the "
        "device so the native path needs no JIT"
    ),
}


def _driver_line(s: Situation, _wanted: Target | None) -> str:
    """PTX newer than the driver can JIT-compile."""
    needs = f"CUDA {s.driver_needed}" if s.driver_needed else "a newer CUDA"
    has = f" (this one supports CUDA {s.driver})" if s.driver else ""
    return (
        f"the PTX needs a driver for {needs} or newer{has}: update the driver, or build the "
        "PTX with the toolkit of the oldest driver you ship to"
    )


def _kernel_line(s: Situation, _wanted: Target | None) -> str | None:
    """A kernel asked for and not present: which are, and the closest name."""
    kernel, kernels = s.kernel, s.kernels
    if kernel is None:
        return None
    if not kernels:
        return f"no artifact holds any kernel: check that {kernel} is compiled into them"
    close = difflib.get_close_matches(kernel, kernels)  # the closest first
    present = ", ".join(sorted(kernels)[:8]) + (", ..." if len(kernels) > 8 else "")
    meant = f"; did you mean {close[0]}?" if close else ""
    return f"kernels present: {present}{meant}"


def _library_line(s: Situation, wanted: Target | None) -> str | None:
    """A loaded library without code for the device: who ships it."""
    if s.library is None:
        return None
    code = f" with code for {wanted.as_sass()}" if wanted is not None else ""
    if s.distribution:
        return f"{s.library} comes from {s.distribution}: install a build of it{code}"
    return f"{s.library} is not from an installed distribution: rebuild it{code}"


_SAY: dict[Cause, Callable[[Situation, Target | None], str | None]] = {
    Cause.MISSING_SASS: _code_line,
    Cause.NO_KERNEL_IMAGE: _code_line,
    Cause.NO_DEVICE_CODE: _code_line,
    Cause.WRONG_TARGET: _code_line,
    Cause.MISSING_PTX: _ptx_line,
    Cause.JIT_DISABLED: _ptx_line,
    Cause.PTX_NEEDS_DRIVER: _driver_line,
    Cause.UNSUPPORTED_PTX: _driver_line,
    Cause.TRAP_STUB: _stub_line,
    Cause.MISSING_KERNEL: _kernel_line,
    Cause.LOADED_LIBRARY: _library_line,
    Cause.HOST_ARCH: _host_line,
    Cause.DRIVER_TOO_OLD: _old_driver_line,
}


def lto_only(target: Target | None) -> str:
    """An artifact with LTO IR only: the device link that turns it into SASS."""
    where = f" for {target.as_sass()}" if target is not None else ""
    return f"it holds LTO IR only: device-link it (nvcc -dlink -dlto){where} so it carries SASS"
