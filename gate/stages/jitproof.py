"""The project's own PTX, loaded by the driver's JIT one module per process.

When the whole program cannot run under forced JIT because a library outside the
project ships no PTX (torch's ``libtorch_cuda.so``: 2,789 cubins, no PTX), the seed's
JIT run fails for a reason outside the user's artifacts. The JIT path of the user's
own code is still proved: each PTX entry of the project's artifacts that targets this
device is written to a file and handed to ``python -m gate.stages.jitcheck`` in a
fresh process with ``CUDA_FORCE_PTX_JIT=1``, ``CUDA_CACHE_DISABLE=1`` and an empty
``CUDA_CACHE_PATH``; it must load, and every kernel it declares must be found.

A module whose every kernel the launch recorder saw launched from the driver's JIT
output in the entry points' forced-JIT runs is proved by those runs already (the
driver compiled its PTX and ran each kernel of it): it is not loaded again.
"""

from __future__ import annotations

import json
import shutil
import sys
import tempfile
from collections.abc import Collection, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

from gate import proc
from gate.errors import BadInputError
from gate.evidence import EvidenceDir, safe_name
from gate.reader.ptx import PtxModule, ptx_modules
from gate.render.text import count
from gate.rules.causes import Cause, ExecPath
from gate.rules.compat import ptx_jits_for
from gate.rules.targets import Capability
from gate.rules.verdict import Check, CheckState
from gate.stages.inspected import Inspected
from gate.stages.predict import Prediction

_TIMEOUT = 600.0
_ENV = {"CUDA_FORCE_PTX_JIT": "1", "CUDA_CACHE_DISABLE": "1"}


@dataclass(frozen=True)
class Proofs:
    """Each PTX module load as a check, per artifact name whether all of its loads passed."""

    checks: tuple[Check, ...]
    outcomes: tuple[tuple[str, bool], ...]
    commands: tuple[proc.Result, ...] = ()
    by_launches: frozenset[str] = frozenset()  # proved by recorded JIT launches alone

    def proved_names(self) -> frozenset[str]:
        """The artifacts that had at least one PTX proof, and all of whose proofs passed."""
        return frozenset(name for name, ok in self.outcomes if ok)


def start(
    predictions: Sequence[Prediction],
    artifacts: Sequence[Inspected],
    cap: Capability,
    *,
    side_by_side: bool = True,
    jit_launched: Collection[str] = frozenset(),
) -> Pending:
    """Start loading the PTX of every project artifact behind an entry point whose JIT run
    is blocked: each load waits on the driver in a process of its own, so the caller can
    write evidence meanwhile and then call :meth:`Pending.finish`. A module whose every
    kernel is in ``jit_launched`` (recorded launched from JIT output on the forced-JIT
    path) passes without a load.

    Up to 8 at once with ``side_by_side``; one at a time on a device in an exclusive
    compute mode."""
    wanted = {s.name for p in predictions if p.jit_blocked_by_library for s in p.sources if s.own}
    checks: list[Check] = []
    failed: set[str] = set()
    loaded: set[str] = set()  # the artifacts with a module to load
    jobs: list[tuple[str, str, int, PtxModule]] = []  # artifact, label, index, module
    for artifact in artifacts:
        if artifact.name not in wanted:
            continue
        try:
            modules = [m for m in ptx_modules(artifact.path) if ptx_jits_for(m.target, cap)]
        except BadInputError as e:
            checks.append(_check(artifact.name, "PTX", False, e.one_line()))
            failed.add(artifact.name)
            continue
        if not modules:
            checks.append(
                _check(artifact.name, "PTX", False, f"no PTX that JIT-compiles for {cap}")
            )
            failed.add(artifact.name)
            continue
        for index, module in enumerate(modules, 1):
            label = f"{module.target} PTX #{index}" if len(modules) > 1 else f"{module.target} PTX"
            if module.kernels and jit_launched and set(module.kernels) <= set(jit_launched):
                ran = count(len(module.kernels), "kernel")
                said = f"all {ran} launched from the driver's JIT output in the forced-JIT runs"
                checks.append(_check(artifact.name, label, True, f"{said} (launch recorder)"))
                continue
            loaded.add(artifact.name)
            jobs.append((artifact.name, label, index, module))
    names = [a.name for a in artifacts if a.name in wanted]
    by_launches = frozenset(n for n in names if n not in loaded and n not in failed)
    return Pending(jobs, checks, failed, names, workers=8 if side_by_side else 1, by=by_launches)


class Pending:
    """PTX loads under way (``workers`` at once); :meth:`finish` collects them."""

    def __init__(
        self,
        jobs: list[tuple[str, str, int, PtxModule]],
        checks: list[Check],
        failed: set[str],
        names: list[str],
        *,
        workers: int = 8,
        by: frozenset[str] = frozenset(),
    ) -> None:
        self._jobs, self._checks, self._failed, self._names = jobs, checks, failed, names
        self._by_launches = by
        self._pool = ThreadPoolExecutor(
            max(1, min(workers, len(jobs))), thread_name_prefix="ptx-load"
        )
        self._loads = [self._pool.submit(_load, job[3].text, job[3].kernels) for job in jobs]

    def finish(self, evidence: EvidenceDir) -> Proofs:
        """Wait for every load; its log goes into the evidence, its outcome into a check."""
        try:
            loads = [future.result() for future in self._loads]
        finally:
            self._pool.shutdown(cancel_futures=True)
        checks, failed = list(self._checks), set(self._failed)
        commands: list[proc.Result] = []
        for (name, label, index, _module), (ok, detail, result) in zip(
            self._jobs, loads, strict=True
        ):
            commands.append(result)
            log = f"ptx-load-{safe_name(name)}-{index}.log"
            evidence.write_text(log, f"# {result.command_line()}\n{result.output()}")
            checks.append(_check(name, label, ok, f"{detail} (log {log})"))
            if not ok:
                failed.add(name)
        outcomes = tuple((name, name not in failed) for name in dict.fromkeys(self._names))
        return Proofs(tuple(checks), outcomes, tuple(commands), self._by_launches)


def _check(artifact: str, label: str, ok: bool, detail: str) -> Check:
    return Check(
        f"{artifact}: {label} loads under forced JIT",
        f"gate.execute.{ExecPath.JIT.value}",
        CheckState.of(ok),
        detail,
        cause=None if ok else Cause.PTX_LOAD,
        path=ExecPath.JIT,
    )


def _load(text: bytes, kernels: Sequence[str]) -> tuple[bool, str, proc.Result]:
    """One module load in a fresh process with an empty, disabled JIT cache."""
    folder = Path(tempfile.mkdtemp(prefix="cuda-gate-ptx-"))
    try:
        source = folder / "module.ptx"
        source.write_bytes(text)
        cache = folder / "cache"
        cache.mkdir()
        result = proc.run(
            [sys.executable, "-m", "gate.stages.jitcheck", str(source), *kernels],
            env_set={**_ENV, "CUDA_CACHE_PATH": str(cache)},
            env_unset=("CUDA_DISABLE_PTX_JIT",),
            timeout=_TIMEOUT,
        )
    finally:
        shutil.rmtree(folder, ignore_errors=True)
    try:
        answer = json.loads(result.stdout.strip().splitlines()[-1])
    except (ValueError, IndexError):
        return False, result.describe_failure("the PTX load", _TIMEOUT), result
    if answer.get("ok"):
        return True, f"loaded by the driver's JIT; {count(len(kernels), 'kernel')} found", result
    log = " ".join(str(answer.get("log", "")).split())[:300]
    return False, f"{answer.get('error')}" + (f": {log}" if log else ""), result
