"""The launch recorder: found, built and cached like the probe, and put in front of each run.

The recorder (``gate/cuda/launchrec.cpp``) is a CUPTI injection library: the driver
loads the file named by ``CUDA_INJECTION64_PATH`` at ``cuInit`` in every process of
an entry point, and it writes what it saw into ``CUDA_GATE_LAUNCH_DIR``
(gate.launch.log reads it). Building it needs CUPTI's headers and library, which come
with the toolkit (``extras/CUPTI``, or ``targets/<arch>`` in some packagings) or from
the ``nvidia-cuda-cupti`` wheel (``nvidia/cu13/include`` and ``lib``; cuda-gate's
``launches`` extra installs it). The built library is kept by gate.tools.buildcache under a
key that covers the toolchain, the source and the CUPTI it links (named on the
command line, its header as an input), and it finds that CUPTI by its run path.

Where no CUPTI is found, or the user already named an injection library (a profiler
in ``CUDA_INJECTION64_PATH``), the runs go ahead unrecorded and the reason is said
once: the gate never replaces the user's injection.
"""

from __future__ import annotations

import os
import platform
import re
import shutil
from collections.abc import Mapping
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from importlib import metadata
from pathlib import Path

from gate import proc
from gate.system import toolkit
from gate.tools import buildcache
from gate.tools.programs import BUILD_TIMEOUT, cuda_source

INJECTION = "CUDA_INJECTION64_PATH"
FOLDER = "CUDA_GATE_LAUNCH_DIR"
SOURCE = "launchrec.cpp"
LIBRARY = "liblaunchrec.so"


@dataclass(frozen=True)
class Cupti:
    """Where CUPTI's header and library are, and where they came from."""

    include: Path
    library: Path  # libcupti.so.N itself
    source: str  # "toolkit (…/extras/CUPTI)" or "nvidia-cuda-cupti wheel (…)"
    version: tuple[int, int] | None = None  # the wheel's major.minor (a toolkit's is its own)


@dataclass(frozen=True)
class Recorder:
    """The built recorder, or why there is none (``library`` None and ``note`` says why)."""

    library: Path | None
    note: str
    build: proc.Result | None = None
    cupti: Path | None = None  # the libcupti it links

    def objects(self) -> frozenset[Path]:
        """What the recorder brings into every recorded process (itself, its CUPTI), resolved:
        the gate's instruments, left out of what the entry point loaded."""
        return frozenset(p.resolve() for p in (self.library, self.cupti) if p is not None)

    def env_for(
        self, folder: Path, entry_env: Mapping[str, str], environ: Mapping[str, str] | None = None
    ) -> tuple[dict[str, str], str]:
        """The variables that record a run into ``folder``, or none and why not.

        An injection library the user set (in the gate's environment or the entry
        point's ``env``) stays: the run is not recorded, and the note says so.
        """
        if self.library is None:
            return {}, self.note
        theirs = entry_env.get(INJECTION) or (os.environ if environ is None else environ).get(
            INJECTION
        )
        if theirs:
            return {}, (
                f"not recorded: {INJECTION} is already set ({theirs}); the gate keeps that "
                "injection library and runs without its launch recorder"
            )
        return {INJECTION: str(self.library), FOLDER: str(folder)}, ""


def find_cupti(nvcc: str, *, search_wheels: bool = True) -> Cupti | None:
    """CUPTI from the toolkit behind ``nvcc``, else from the nvidia-cuda-cupti wheel, else None."""
    found = shutil.which(nvcc) or nvcc
    root = Path(found).resolve().parent.parent
    arch = f"{platform.machine()}-linux"
    for include, libs in (
        (root / "extras/CUPTI/include", (root / "extras/CUPTI/lib64", root / "extras/CUPTI/lib")),
        (root / "targets" / arch / "include", (root / "targets" / arch / "lib",)),
        (root / "include", (root / "lib64", root / "lib")),
    ):
        library = _cupti_library(include, libs)
        if library is not None:
            return Cupti(include, library, f"toolkit ({include.parent})")
    if not search_wheels:
        return None
    for folder in toolkit.wheel_folders(cuda12="cuda_cupti"):
        library = _cupti_library(folder / "include", (folder / "lib",))
        if library is not None:
            return Cupti(
                folder / "include", library, f"nvidia-cuda-cupti wheel ({folder})", _wheel_version()
            )
    return None


def _wheel_version() -> tuple[int, int] | None:
    try:
        found = re.match(r"(\d+)\.(\d+)", metadata.version("nvidia-cuda-cupti"))
    except metadata.PackageNotFoundError:
        return None
    return (int(found[1]), int(found[2])) if found else None


def toolkit_version(nvcc: str) -> tuple[int, int] | None:
    """The toolkit's CUDA release as nvcc says it (``release 13.0, V13.0.88``), or None."""
    result = proc.run([nvcc, "--version"], timeout=60)
    found = re.search(r"release (\d+)\.(\d+)", result.stdout) if result.ok else None
    return (int(found[1]), int(found[2])) if found else None


def mismatch(cupti: Cupti, toolkit: tuple[int, int] | None) -> str | None:
    """Why a CUPTI wheel cannot build with this toolkit, or None: a newer CUPTI's headers
    include the runtime headers of its own CUDA release, which an older toolkit lacks."""
    if cupti.version is None or toolkit is None or cupti.version <= toolkit:
        return None
    have, want = ".".join(map(str, cupti.version)), ".".join(map(str, toolkit))
    return (
        f"kernel launches not recorded: the nvidia-cuda-cupti wheel is CUDA {have}, newer than "
        f"the toolkit (CUDA {want}), whose headers it needs; pip install "
        f"'nvidia-cuda-cupti~={want}.0'"
    )


def _cupti_library(include: Path, libs: tuple[Path, ...]) -> Path | None:
    if not (include / "cupti.h").is_file():
        return None
    for lib in libs:
        candidates = sorted(lib.glob("libcupti.so.*")) or sorted(lib.glob("libcupti.so"))
        # libcupti.so.13 rather than libcupti.so.13.0.85: the name the wheel and toolkit link.
        for path in sorted(candidates, key=lambda p: len(p.name)):
            if path.is_file():
                return path
    return None


def build(
    nvcc: str,
    workdir: Path,
    *,
    use_cache: bool = True,
    cupti: Cupti | None = None,
    search_wheels: bool = True,
    folder: Path | None = None,
) -> Recorder:
    """Compile the recorder with the toolkit's nvcc against ``cupti`` (found when not given);
    ``folder`` is the build cache's (default: the inspection cache's)."""
    cupti = cupti or find_cupti(nvcc, search_wheels=search_wheels)
    if cupti is None:
        return Recorder(
            None,
            "kernel launches not recorded: no CUPTI found (neither the toolkit's extras/CUPTI "
            "nor the nvidia-cuda-cupti wheel; pip install 'cuda-gate[launches]')",
        )
    wrong = mismatch(cupti, toolkit_version(nvcc))
    if wrong is not None:
        return Recorder(None, wrong)
    here = workdir / "launch-recorder"
    here.mkdir(parents=True, exist_ok=True)
    source = here / SOURCE
    source.write_text(cuda_source(SOURCE), encoding="utf-8")
    output = here / LIBRARY
    lib_dir = cupti.library.parent
    argv = [
        nvcc,
        "-shared",
        "-cudart=none",  # no runtime: the static one brings a sm_75 cubin the run would judge
        "-O2",
        "-Xcompiler",
        "-fPIC,-fvisibility=hidden",
        f"-I{cupti.include}",
        SOURCE,  # relative to the build folder: the cache key holds no workdir
        "-o",
        LIBRARY,
        f"-L{lib_dir}",
        f"-l:{cupti.library.name}",
        f"-Xlinker=-rpath={lib_dir}",
        "-ldl",
    ]
    result = buildcache.compile_program(
        argv,
        output=output,
        inputs=[source, cupti.include / "cupti_version.h"],
        cwd=here,
        timeout=BUILD_TIMEOUT,
        use_cache=use_cache,
        folder=folder,
    )
    if not result.ok:
        said = result.error_line() or f"exit status {result.returncode}"
        return Recorder(
            None, f"kernel launches not recorded: the recorder did not build ({said})", result
        )
    return Recorder(
        output, f"launches recorded with CUPTI from the {cupti.source}", result, cupti.library
    )


class PendingBuild:
    """The recorder built in the background while the project builds and is inspected."""

    def __init__(self, nvcc: str, workdir: Path, *, use_cache: bool = True) -> None:
        self._pool = ThreadPoolExecutor(1, thread_name_prefix="launch-recorder")
        self._future: Future[Recorder] = self._pool.submit(
            build, nvcc, workdir, use_cache=use_cache
        )

    def result(self) -> Recorder:
        """The recorder, waiting for its build; an unexpected error is a note, not a crash."""
        try:
            return self._future.result()
        except OSError as e:
            return Recorder(None, f"kernel launches not recorded: {e}")
        finally:
            self._pool.shutdown(wait=False)
