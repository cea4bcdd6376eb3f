"""Stage 2, probe: build and run the shipped probe to read device 0's compute capability.

The target is never guessed: it is what the CUDA runtime reports (or what ``--target``
names, ``a``/``f`` variant kept), and it must be in the toolkit's own list of
supported targets, or the gate stops with that message. Without a usable device the
stage says once which of "no driver", "no device visible", "driver older than the
toolkit" holds, and what to do next.

In the delivery image (``--image``) the probe is compiled by the image's own nvcc into
the gate's work folder (mounted into the container) and run in a fresh container with
the GPUs passed in; the facts that explain a missing device are the container's.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from pathlib import Path

from gate import proc
from gate.container.place import HOST, InImage, Place
from gate.errors import GateError, NoDeviceError, ToolError, UnsupportedTargetError
from gate.evidence import EvidenceDir
from gate.rules.causes import Cause
from gate.rules.compat import sass_runs_on
from gate.rules.targets import Capability, Target
from gate.rules.verdict import Check, CheckState
from gate.system import machine, toolkit
from gate.tools import buildcache
from gate.tools.programs import BUILD_TIMEOUT, cuda_source

PROBE_TIMEOUT = 120.0
_CAPABILITY_RE = re.compile(r"^\s*(\d{2,3})\s*$", re.MULTILINE)
_COMPUTE_MODE_RE = re.compile(r"^compute mode (\d+)$", re.MULTILINE)
_JIT_VARIABLES = ("CUDA_FORCE_PTX_JIT", "CUDA_DISABLE_PTX_JIT")


@dataclass(frozen=True)
class ProbeOutcome:
    """The device (or why there is none) and the target the run builds and checks for."""

    capability: Capability | None
    device_error: str | None
    target: Target | None
    target_source: str | None
    commands: tuple[proc.Result, ...]
    checks: tuple[Check, ...]
    failure: GateError | None = None
    # Whether processes may share the device (compute mode "default"): the gate then runs
    # its own programs side by side. Exclusive-process mode lets one process in at a time.
    shared: bool = True


def shared_device(probe_stderr: str) -> bool:
    """Whether the probe saw compute mode 0 (default), or said nothing about it."""
    match = _COMPUTE_MODE_RE.search(probe_stderr)
    return match is None or match.group(1) == "0"


def compile_gate_program(
    argv: list[str],
    *,
    output: Path,
    inputs: list[Path],
    cwd: Path,
    use_cache: bool,
    place: Place = HOST,
    claim_strays: bool = True,
) -> proc.Result:
    """One of the gate's own programs compiled: here through the build cache, in an
    image by its own nvcc, uncached (the cache knows this machine's toolchain only).
    ``claim_strays=False`` beside the project's own commands (proc.run)."""
    if place.in_image:
        output.unlink(missing_ok=True)
        return place.run(argv, cwd=cwd, timeout=BUILD_TIMEOUT, claim_strays=claim_strays)
    # A toolkit from NVIDIA's wheels keeps its libraries where its nvcc.profile never looks.
    linked = [argv[0], *toolkit.of(argv[0]).link_flags(), *argv[1:]]
    return buildcache.compile_program(
        linked,
        output=output,
        inputs=inputs,
        cwd=cwd,
        timeout=BUILD_TIMEOUT,
        use_cache=use_cache,
        claim_strays=claim_strays,
    )


def build_probe(
    nvcc: str, workdir: Path, *, use_cache: bool = True, place: Place = HOST
) -> tuple[Path, proc.Result]:
    """Compile the probe (runtime API calls only, so any device can run it).

    The same toolchain compiles the same probe the same way: a warm run reuses it
    (gate.tools.buildcache).
    """
    source = workdir / "probe.cu"
    source.write_text(cuda_source("probe.cu"), encoding="utf-8")
    binary = workdir / "probe"
    result = compile_gate_program(
        [nvcc, str(source), "-o", str(binary)],
        output=binary,
        inputs=[source],
        cwd=workdir,
        use_cache=use_cache,
        place=place,
    )
    if not result.ok:
        raise ToolError(
            result.describe_failure("building the probe", BUILD_TIMEOUT),
            hint=machine.nvcc_failure_hint(result.output(), None if place.in_image else nvcc),
        )
    return binary, result


def run_probe(binary: Path, place: Place = HOST) -> tuple[Capability, proc.Result]:
    """Run the probe; NoDeviceError saying why no device is usable, and what to do."""
    result = place.run([str(binary)], timeout=PROBE_TIMEOUT, env_unset=_JIT_VARIABLES)
    if result.timed_out:
        raise NoDeviceError(f"the probe did not finish within {PROBE_TIMEOUT:g} s; it was killed")
    match = _CAPABILITY_RE.search(result.stdout)
    if result.returncode != 0 or not match:
        report = machine.parse_probe_report(result.stderr)
        facts = _image_facts(place) if isinstance(place, InImage) else None
        raise NoDeviceError(
            f"no CUDA device was usable: {machine.diagnose_no_device(report, facts)}",
            hint="to check the artifacts without a GPU, run with --target naming the device "
            "you ship to: sm_121 for DGX Spark",
        )
    return Capability.parse(match.group(1)), result


def _image_facts(place: InImage) -> machine.DeviceFacts | None:
    """The container's device facts (its own ``sh`` asked); None where it has no shell."""
    result = place.run(["sh", "-c", machine.DEVICE_FACTS_SCRIPT], timeout=PROBE_TIMEOUT)
    if not result.ok:
        return None
    where = f" in the image {place.image.reference.text} ({place.gpus_said})"
    return machine.parse_device_facts(result.stdout, where)


def refuse_unbuildable(target: Target, nvcc: str | None) -> None:
    """Before a run: UnsupportedTargetError (exit 3) when the toolkit cannot build ``target``.

    Nothing is built, written or stored for a target no build could serve. A toolkit
    that cannot be found or asked is left to the environment stage, which records it.
    """
    try:
        path = machine.nvcc_path(nvcc)
        codes = proc.run_checked(
            [path, "--list-gpu-code"], what="nvcc --list-gpu-code", timeout=BUILD_TIMEOUT
        )
    except ToolError:
        return
    supported = machine.parse_gpu_code_list(codes.stdout)
    if supported:
        require_supported(target, supported, path)


def require_supported(
    target: Target, supported: tuple[Target, ...], nvcc: str, place: Place = HOST
) -> tuple[str, proc.Result | None]:
    """Stop when the toolkit cannot build ``target``; never substitute an older one.

    ``nvcc --list-gpu-code`` lists plain targets only, so an ``a``/``f`` target is asked
    of nvcc itself (a dry run of ``-gencode arch=compute_90a,code=sm_90a``: CUDA 13.0
    accepts ``sm_90a`` and ``sm_100f`` and refuses ``sm_90f``). Returns how it was
    established, and the dry run when there was one.
    """
    sass = target.as_sass()
    plain = sass.plain()
    listed = " ".join(str(t) for t in supported) or "none"
    if plain not in supported:
        raise UnsupportedTargetError(
            f"{sass} is not in this toolkit's supported targets ({listed})",
            hint="install a CUDA toolkit that lists it; do not substitute an older target",
        )
    if sass == plain:
        return f"{sass} is in nvcc --list-gpu-code", None
    gencode = f"arch={sass.as_ptx()},code={sass}"
    result = place.run(
        [nvcc, "--dryrun", "-gencode", gencode, "-x", "cu", "-c", os.devnull, "-o", os.devnull],
        timeout=BUILD_TIMEOUT,
    )
    if not result.ok:
        said = result.last_line() or f"exit status {result.returncode}"
        raise UnsupportedTargetError(
            f"{sass}: this toolkit does not build it ({said}); {plain} is listed, but "
            f"{plain} code lacks {sass}'s features",
            hint="install a CUDA toolkit that builds it; do not substitute the plain target",
        )
    return f"{sass} is accepted by nvcc (a dry run of -gencode {gencode})", result


def run(
    evidence: EvidenceDir,
    *,
    nvcc: str,
    supported: tuple[Target, ...],
    workdir: Path,
    explicit_target: Target | None,
    use_cache: bool = True,
    place: Place = HOST,
) -> ProbeOutcome:
    """Read the device's capability; pick the target; fail when the toolkit lacks it."""
    commands: list[proc.Result] = []
    checks: list[Check] = []
    capability, device_error, shared = None, None, True
    try:
        binary, built = build_probe(nvcc, workdir, use_cache=use_cache, place=place)
        commands.append(built)
        try:
            capability, ran = run_probe(binary, place)
            shared = shared_device(ran.stderr)
            commands.append(ran)
            evidence.write_text("compute-capability.txt", f"{capability.number}\n")
            evidence.write_text("probe.log", ran.output())
            checks.append(
                Check(
                    "compute capability",
                    "gate.probe",
                    CheckState.PASSED,
                    f"device 0 is {capability}",
                )
            )
        except NoDeviceError as e:
            device_error = e.message
            evidence.write_text("compute-capability.txt", f"unavailable: {e.one_line()}\n")
            if explicit_target is None:
                return ProbeOutcome(None, device_error, None, None, tuple(commands), (), e)
            checks.append(Check("compute capability", "gate.probe", CheckState.NOT_RUN, e.message))
        if explicit_target is not None:
            target, source = explicit_target.as_sass(), "--target"
        else:
            assert capability is not None  # noqa: S101 - no device and no target returned above
            target, source = capability.sm(), "probe"
        if capability is not None and not sass_runs_on(target, capability):
            checks.append(
                Check(
                    f"{target} serves the device",
                    "gate.probe",
                    CheckState.FAILED,
                    f"{target} SASS cannot run on the detected device {capability}",
                    cause=Cause.WRONG_TARGET,
                )
            )
        how, dry_run = require_supported(target, supported, nvcc, place)
        if dry_run is not None:
            commands.append(dry_run)
        checks.append(
            Check(f"{target} supported by the toolkit", "gate.probe", CheckState.PASSED, how)
        )
    except GateError as e:
        return ProbeOutcome(capability, device_error, None, None, tuple(commands), tuple(checks), e)
    return ProbeOutcome(
        capability, device_error, target, source, tuple(commands), tuple(checks), shared=shared
    )
