"""The gate's own work done once per toolchain: its helper programs, cuobjdump's outputs.

The probe and the smoke program are the gate's, not the project's; each costs an nvcc
start (one to two seconds) and would come out the same again. A compiled program is
kept under a key that covers everything its bytes depend on:

* the command line, with the output path left out (the same options, targets, defines);
* every input file's bytes (the ``.cu`` source the gate wrote);
* the toolchain: the real path, size and modification time of nvcc, of the tools nvcc
  drives (cicc, ptxas, fatbinary, nvlink, cudafe++) and of the host compiler found on
  PATH, and the variables that change what nvcc does (``NVCC_PREPEND_FLAGS``,
  ``NVCC_APPEND_FLAGS``, ``NVCC_CCBIN``).

Reinstalling or upgrading any of them changes the key. A hit copies the kept program
into place and returns a :class:`gate.proc.Result` whose ``reused`` names the key, so
the evidence says the build was reused; the program still runs every time. The project's
own build commands are never cached. Entries live under ``builds/`` of the inspection
cache's folder (:func:`gate.scan.cache.cache_dir`); a missing, truncated or foreign
entry is rebuilt and written again, and a cache that cannot be written is skipped.
``use_cache=False`` (``--no-cache``) compiles and touches nothing.

The cuobjdump cross-check is kept the same way (:func:`tool_output`): what cuobjdump
printed about a file with a given SHA-256, keyed also by cuobjdump's and nvdisasm's
signatures and the options, under ``outputs/``.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import shutil
from collections.abc import Callable, Sequence
from pathlib import Path

from gate import proc
from gate.errors import EvidenceError
from gate.fsutil import sha256_file, write_atomic
from gate.scan.cache import cache_dir

FORMAT = "cuda-gate-build-cache"
VERSION = 1
# Beside nvcc (the toolkit's bin folder), and relative to it.
TOOLKIT_PARTS = ("ptxas", "fatbinary", "nvlink", "cudafe++", "../nvvm/bin/cicc")
HOST_COMPILERS = ("g++", "gcc", "c++", "cc")
NVCC_VARIABLES = ("NVCC_PREPEND_FLAGS", "NVCC_APPEND_FLAGS", "NVCC_CCBIN")
# A kept program's output is evidence text: keep it bounded.
_OUTPUT_LIMIT = 1 << 20
# A tool's output is kept only up to this many characters (a SASS dump can be large).
KEPT_OUTPUT_LIMIT = 64 << 20
# All kept outputs together: past this, the least recently used go first. Most outputs
# are of builds that never come back (a project's artifact changes with every build).
KEPT_OUTPUTS_TOTAL = 512 << 20


def compile_program(
    argv: Sequence[str],
    *,
    output: Path,
    inputs: Sequence[Path],
    cwd: Path,
    timeout: float,
    use_cache: bool = True,
    folder: Path | None = None,
    claim_strays: bool = True,
) -> proc.Result:
    """Run the nvcc command ``argv`` (whose first word is nvcc) that writes ``output``.

    Reuses an earlier program built by the same toolchain from the same inputs and
    options when the cache holds one; else compiles and keeps the result.
    ``claim_strays=False`` beside the project's own commands (proc.run).
    """
    if not use_cache:
        return proc.run(argv, cwd=cwd, timeout=timeout, claim_strays=claim_strays)
    try:
        key = _key(argv, output, inputs)
    except OSError:  # an input went missing: let nvcc say
        return proc.run(argv, cwd=cwd, timeout=timeout, claim_strays=claim_strays)
    entry = (folder or cache_dir()) / "builds" / key[:2] / key
    reused = _reuse(entry, key, output, argv, cwd)
    if reused is not None:
        return reused
    result = proc.run(argv, cwd=cwd, timeout=timeout, claim_strays=claim_strays)
    if result.ok and output.is_file():
        _keep(entry, key, output, result)
    return result


def toolchain_identity(nvcc: str) -> list[str]:
    """What identifies the compilers behind ``nvcc``: real path, size, mtime of each part."""
    found = shutil.which(nvcc) or nvcc
    base = Path(found).resolve()
    parts = [base, *(base.parent / name for name in TOOLKIT_PARTS)]
    hosts = [shutil.which(name) for name in HOST_COMPILERS]
    lines = [_signature(p) for p in parts]
    lines += [_signature(Path(h)) for h in hosts if h]
    lines += [f"{name}={os.environ.get(name, '')}" for name in NVCC_VARIABLES]
    return lines


def _signature(path: Path) -> str:
    try:
        real = path.resolve()
        st = real.stat()
    except OSError:
        return f"{path}: absent"
    return f"{real} {st.st_size} {st.st_mtime_ns}"


def _key(argv: Sequence[str], output: Path, inputs: Sequence[Path]) -> str:
    h = hashlib.sha256(f"{FORMAT} {VERSION}\n".encode())
    for line in toolchain_identity(argv[0]):
        h.update(f"tool {line}\n".encode())
    out = str(output)
    for word in argv[1:]:
        h.update(b"arg " + ("<output>" if word == out else word).encode() + b"\n")
    for path in inputs:
        h.update(f"input {path.name} ".encode() + sha256_file(path).encode() + b"\n")
    return h.hexdigest()


def _reuse(
    entry: Path, key: str, output: Path, argv: Sequence[str], cwd: Path
) -> proc.Result | None:
    """The kept program copied to ``output``, as a Result; None on any doubt."""
    try:
        meta = json.loads((entry / "meta.json").read_bytes())
        if meta["format"] != FORMAT or meta["version"] != VERSION or meta["key"] != key:
            return None
        program = entry / "program"
        if sha256_file(program) != meta["sha256"]:
            return None
        stdout, stderr = str(meta["stdout"]), str(meta["stderr"])
        shutil.copyfile(program, output)
        output.chmod(0o755)
    except (OSError, ValueError, KeyError, TypeError):
        return None
    return proc.Result(
        argv=tuple(argv),
        returncode=0,
        stdout=stdout,
        stderr=stderr,
        duration=0.0,
        cwd=str(cwd),
        reused=key,
    )


def _keep(entry: Path, key: str, output: Path, result: proc.Result) -> None:
    """Keep the program, then its description (which names the program's SHA-256)."""
    try:
        data = output.read_bytes()
        write_atomic(entry / "program", data, mode=0o755)
        meta = {
            "format": FORMAT,
            "version": VERSION,
            "key": key,
            "sha256": hashlib.sha256(data).hexdigest(),
            "stdout": result.stdout[:_OUTPUT_LIMIT],
            "stderr": result.stderr[:_OUTPUT_LIMIT],
        }
        write_atomic(entry / "meta.json", (json.dumps(meta, indent=1) + "\n").encode())
    except (OSError, EvidenceError):
        return  # a cache is only a shortcut


def tool_output(
    argv: Sequence[str],
    *,
    subject: Path,
    digest: str,
    run: Callable[[], proc.Result],
    companions: Sequence[str] = (),
    use_cache: bool = True,
    folder: Path | None = None,
) -> proc.Result:
    """What a read-only tool (cuobjdump) printed about one file, kept by the file's SHA-256.

    The key covers the tool's and its ``companions``' signatures (nvdisasm, which
    ``--dump-sass`` runs), the options, and the file's name and SHA-256 (the tool prints
    names derived from the file name). ``run`` produces the output on a miss; only a
    successful run whose output is at most :data:`KEPT_OUTPUT_LIMIT` bytes is kept.
    """
    if not use_cache:
        return run()
    h = hashlib.sha256(f"{FORMAT} {VERSION} output\n".encode())
    for tool in (argv[0], *companions):
        h.update(f"tool {_signature(Path(shutil.which(tool) or tool))}\n".encode())
    for word in argv[1:]:
        shown = f"<subject {subject.name} {digest}>" if word == str(subject) else word
        h.update(b"arg " + shown.encode() + b"\n")
    key = h.hexdigest()
    entry = (folder or cache_dir()) / "outputs" / key[:2] / f"{key}.json"
    try:
        doc = json.loads(entry.read_bytes())
        if doc["format"] == FORMAT and doc["version"] == VERSION and doc["key"] == key:
            with contextlib.suppress(OSError):
                os.utime(entry)  # used now: the last to go when the outputs are pruned
            return proc.Result(
                argv=tuple(argv),
                returncode=0,
                stdout=str(doc["stdout"]),
                stderr=str(doc["stderr"]),
                duration=0.0,
                reused=key,
            )
    except (OSError, ValueError, KeyError, TypeError):
        pass
    result = run()
    if result.ok and len(result.stdout) + len(result.stderr) <= KEPT_OUTPUT_LIMIT:
        doc = {"format": FORMAT, "version": VERSION, "key": key}
        doc |= {"stdout": result.stdout, "stderr": result.stderr}
        with contextlib.suppress(OSError, EvidenceError):
            write_atomic(entry, json.dumps(doc).encode())
            _prune(entry.parent.parent, KEPT_OUTPUTS_TOTAL)
    return result


def _prune(folder: Path, budget: int) -> None:
    """Delete the least recently used files under ``folder`` until they fit ``budget``."""
    files = []
    for path in folder.glob("*/*.json"):
        with contextlib.suppress(OSError):
            st = path.stat()
            files.append((st.st_mtime_ns, st.st_size, path))
    total = sum(size for _, size, _ in files)
    for _, size, path in sorted(files):
        if total <= budget:
            break
        with contextlib.suppress(OSError):
            path.unlink()
            total -= size
