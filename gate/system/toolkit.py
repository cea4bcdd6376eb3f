"""A CUDA toolkit installed from NVIDIA's wheels: where its nvcc is, what it needs to link,
and which of its wheels is missing.

NVIDIA ships the toolkit on PyPI as wheels that all unpack into one folder,
``site-packages/nvidia/cu13`` for CUDA 13: ``nvidia-cuda-nvcc`` (bin/), ``nvidia-nvvm``
(nvvm/bin/cicc), ``nvidia-cuda-crt`` (include/crt), ``nvidia-cuda-runtime`` (include/,
lib/libcudart_static.a) and ``nvidia-cuda-cccl`` (include/cccl). CI runners and containers
install it so, with no nvcc on PATH. Two things differ from a toolkit from NVIDIA's
installers (../shared/CUDA-FACTS.md):

* nvcc.profile adds ``-L$(TOP)/lib64`` for the link, but the wheels put the libraries in
  ``lib``: every link fails with ``cannot find -lcudart_static``. The gate passes the
  folder (``-L`` to its own programs, ``LIBRARY_PATH`` to the project's builds).
* Each part is a wheel of its own, of the same release: a missing one fails far from its
  cause (``cicc: not found``, ``crt/host_config.h: No such file``); the gate names the wheel
  and the pip command instead.

A toolkit elsewhere (installers, distributions, conda) is left as its own profile says.
"""

from __future__ import annotations

import os
import re
import shutil
import sys
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path

# The folders the wheels unpack into, newest major first (nvidia/cu13, later cu14...).
_WHEEL_ROOT = re.compile(r"cu(\d+)")
# What each wheel brings that a build of a .cu file needs, relative to the toolkit folder.
PARTS: tuple[tuple[str, str], ...] = (
    ("nvidia-nvvm", "nvvm/bin/cicc"),
    ("nvidia-cuda-crt", "include/crt/host_config.h"),
    ("nvidia-cuda-runtime", "include/cuda_runtime.h"),
    ("nvidia-cuda-runtime", "lib/libcudart_static.a"),
    ("nvidia-cuda-cccl", "include/cccl/cuda/std/version"),
)
TOOLKIT_EXTRA = "cuda-gate[toolkit]"
# The wheels carry the versioned shared runtime only: ``-cudart shared`` (``-lcudart``)
# finds no libcudart.so to link against.
_NO_SHARED_RUNTIME = re.compile(r"cannot find -lcudart\b(?!_)")


@dataclass(frozen=True)
class Toolkit:
    """The toolkit behind an nvcc: its folder, whether it came from NVIDIA's wheels, the
    folder its libraries are in when nvcc's own profile does not look there, and the
    wheels (``name==X.Y.*``) missing from it."""

    root: Path
    from_wheels: bool
    libraries: Path | None
    missing: tuple[str, ...]

    def link_flags(self) -> list[str]:
        """What an nvcc command of the gate's own adds to link: ``-L`` the library folder."""
        return [f"-L{self.libraries}"] if self.libraries is not None else []

    def build_environment(self, nvcc: str, environ: Mapping[str, str]) -> dict[str, str]:
        """Variables a project's build gets so that it links with this toolkit: the library
        folder first on ``LIBRARY_PATH`` (gcc's link search), and nvcc's folder first on
        ``PATH`` when another nvcc (or none) is found there first. Empty for a toolkit whose
        own profile finds everything."""
        if not self.from_wheels:
            return {}
        added: dict[str, str] = {}
        if self.libraries is not None:
            added["LIBRARY_PATH"] = _prepend(str(self.libraries), environ.get("LIBRARY_PATH"))
        folder = str(Path(nvcc).parent)
        on_path = shutil.which("nvcc", path=environ.get("PATH", ""))
        if on_path is None or Path(on_path).resolve() != Path(nvcc).resolve():
            added["PATH"] = _prepend(folder, environ.get("PATH"))
        return added

    def described(self) -> str:
        """``from NVIDIA's wheels at ROOT`` or ``at ROOT``."""
        return f"from NVIDIA's wheels at {self.root}" if self.from_wheels else f"at {self.root}"

    def missing_hint(self) -> str | None:
        """The pip command that completes a wheel toolkit, None when nothing is missing."""
        if not self.missing:
            return None
        wanted = " ".join(f"'{m}'" for m in self.missing)
        return (
            f"the CUDA toolkit from NVIDIA's wheels at {self.root} lacks "
            f"{', '.join(m.split('==')[0] for m in self.missing)}: pip install {wanted} "
            "into the same environment"
        )


def _prepend(folder: str, current: str | None) -> str:
    return f"{folder}{os.pathsep}{current}" if current else folder


def of(nvcc: str) -> Toolkit:
    """The toolkit ``nvcc`` belongs to (its folder is the one above nvcc's own)."""
    root = Path(nvcc).resolve().parent.parent
    from_wheels = root.parent.name == "nvidia" and _WHEEL_ROOT.fullmatch(root.name) is not None
    libraries = None
    if not (root / "lib64").is_dir() and (root / "lib" / "libcudart_static.a").is_file():
        libraries = root / "lib"
    missing: tuple[str, ...] = ()
    if from_wheels:
        pin = _release_pin(root)
        names = dict.fromkeys(name for name, part in PARTS if not (root / part).exists())
        missing = tuple(f"{name}{pin}" for name in names)
    return Toolkit(root, from_wheels, libraries, missing)


def _release_pin(root: Path) -> str:
    """``==13.0.*`` from the installed nvidia-cuda-nvcc wheel beside ``root``, else ``""``."""
    site = root.parent.parent
    for record in sorted(site.glob("nvidia_cuda_nvcc-*.dist-info")):
        found = re.match(r"nvidia_cuda_nvcc-(\d+)\.(\d+)", record.name)
        if found:
            return f"=={found.group(1)}.{found.group(2)}.*"
    return ""


def failure_hint(nvcc: str, output: str) -> str | None:
    """What to do about a failed build with this toolkit, where its files say: the wheels
    missing, or the shared runtime the wheels do not carry under a name the linker finds."""
    toolkit = of(nvcc)
    missing = toolkit.missing_hint()
    if missing is not None:
        return missing
    if toolkit.from_wheels and _NO_SHARED_RUNTIME.search(output):
        return (
            f"NVIDIA's runtime wheel has lib/libcudart.so.13-style files only (in "
            f"{toolkit.root / 'lib'}): link the static runtime (nvcc's default) or name the "
            "file, -l:libcudart.so.<major>"
        )
    return None


def search_folders(python: str | None = None) -> list[Path]:
    """Where NVIDIA's wheels may be installed: this interpreter's import path, and the
    site-packages of ``python`` (a project's interpreter, such as a virtual environment's
    ``bin/python3``), in that order."""
    folders = [Path(p) for p in sys.path if p and Path(p).is_dir()]
    if python:
        prefix = Path(python).parent.parent
        folders += sorted((prefix / "lib").glob("python3*/site-packages"), reverse=True)
        folders += sorted((prefix / "local" / "lib").glob("python3*/dist-packages"), reverse=True)
    seen: dict[Path, None] = {}
    for folder in folders:
        seen.setdefault(folder, None)
    return list(seen)


def wheel_folders(
    part: str = "", folders: Iterable[Path] | None = None, *, cuda12: str | None = None
) -> list[Path]:
    """Where NVIDIA's wheels left ``part`` (a folder or file such as ``bin`` or
    ``bin/nvcc``, relative to the toolkit folder; the toolkit folders themselves when
    empty): ``nvidia/cuN/PART`` under each of ``folders`` (default: :func:`search_folders`),
    the newest CUDA major first, then in the order of ``folders``; after them, where
    ``cuda12`` names a CUDA 12 wheel's own folder (``cuda_cupti``), ``nvidia/CUDA12/PART``
    in the order of ``folders``. Only paths that exist, each once."""
    bases = [folder / "nvidia" for folder in (search_folders() if folders is None else folders)]
    found: list[tuple[int, int, Path]] = []
    for order, base in enumerate(bases):
        if not base.is_dir():
            continue
        for root in base.iterdir():
            match = _WHEEL_ROOT.fullmatch(root.name)
            if match and (root / part).exists():
                found.append((-int(match.group(1)), order, root / part))
    out = [path for _, _, path in sorted(found)]
    if cuda12 is not None:
        out += [base / cuda12 / part for base in bases if (base / cuda12 / part).exists()]
    return list(dict.fromkeys(out))


def wheel_nvcc(folders: list[Path]) -> str | None:
    """The first nvcc of NVIDIA's wheels in ``folders``, the newest CUDA major first."""
    for nvcc in wheel_folders("bin/nvcc", folders):
        if nvcc.is_file() and os.access(nvcc, os.X_OK):
            return str(nvcc)
    return None
