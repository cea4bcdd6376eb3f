"""Checks and verdict: what must hold for an artifact to be accepted, and why it was not.

Every check is a record with a JUnit classname; the verdict is accepted only when
every check passed AND both execution paths ran. Diagnoses follow the seed:
native fails / JIT passes -> native target and final link; native passes / JIT
fails -> PTX presence and driver ISA support; both fail -> toolchain, runtime
libraries, device state.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from gate.reader.listing import Kind, Listing
from gate.reader.targets import Capability, Target, Version, min_driver_for_ptx
from gate.stages.execute import ExecPath, Execution, RuntimeFailure

ACCEPTED_STATEMENT = "Passed with the current driver, current artifacts, and tested entry points."


@dataclass(frozen=True)
class Check:
    """One pass/fail fact, as it appears in JUnit and in the summary."""

    name: str
    classname: str
    passed: bool
    message: str
    duration: float = 0.0
    skipped: bool = False
    output: str = ""


@dataclass(frozen=True)
class Verdict:
    """The gate's answer, with the reasons when it is no."""

    accepted: bool
    statement: str
    reasons: tuple[str, ...]


def kernel_matches(found: str, wanted: str) -> bool:
    """``_Z11write_valuePi`` matches ``write_value``: exact, or as an Itanium-mangled name."""
    return found == wanted or f"{len(wanted)}{wanted}" in found


def has_kernel(names: Iterable[str], wanted: str) -> bool:
    """Whether any of ``names`` is the kernel ``wanted``."""
    return any(kernel_matches(n, wanted) for n in names)


def _check(name: str, classname: str, ok: bool, good: str, bad: str) -> Check:
    return Check(name, classname, ok, good if ok else bad)


def listing_checks(
    artifact: str,
    listing: Listing,
    target: Target,
    kernels: Sequence[str],
    *,
    require_sass: bool = True,
    require_ptx: bool = True,
) -> list[Check]:
    """The seed's inspection checks: expected target and kernels in SASS and in PTX."""
    cls = "gate.inspect"
    sass, ptx = target.as_sass(), target.as_ptx()
    checks: list[Check] = []
    sass_targets = listing.targets(Kind.SASS)
    if require_sass:
        checks.append(
            _check(
                f"{artifact}: SASS for {sass}",
                cls,
                any(t.number == sass.number for t in sass_targets),
                f"SASS for {sass} present",
                f"no SASS for {sass}; SASS targets: {_names(sass_targets)}",
            )
        )
        in_sass = _same_number(listing, Kind.SASS, sass)  # sm_90 and sm_90a/f alike
        for kernel in kernels:
            checks.append(
                _check(
                    f"{artifact}: kernel {kernel} in {sass} SASS",
                    cls,
                    has_kernel(in_sass, kernel),
                    f"{kernel} present in {sass} SASS",
                    f"{kernel} missing from {sass} SASS",
                )
            )
    if require_ptx:
        ptx_entries = [e for e in listing.of_kind(Kind.PTX) if e.target.number == ptx.number]
        checks.append(
            _check(
                f"{artifact}: PTX for {ptx}",
                cls,
                bool(ptx_entries),
                f"PTX for {ptx} present (ISA {ptx_entries[0].ptx_isa})" if ptx_entries else "",
                f"no PTX for {ptx}; PTX targets: {_names(listing.targets(Kind.PTX))}",
            )
        )
        for kernel in kernels:
            checks.append(
                _check(
                    f"{artifact}: kernel {kernel} in {ptx} PTX",
                    cls,
                    any(has_kernel(e.kernels, kernel) for e in ptx_entries),
                    f".entry {kernel} present in {ptx} PTX",
                    f".entry {kernel} missing from {ptx} PTX",
                )
            )
    return checks


def _same_number(listing: Listing, kind: Kind, target: Target) -> frozenset[str]:
    return frozenset(
        k for e in listing.of_kind(kind) if e.target.number == target.number for k in e.kernels
    )


def _names(targets: Iterable[Target]) -> str:
    return " ".join(str(t) for t in targets) or "none"


def execution_check(execution: Execution) -> Check:
    """One JUnit case per entry point and path, classname by path, log in system-out."""
    return Check(
        name=f"{execution.entry_point.name} [{execution.path.value}]",
        classname=f"gate.execute.{execution.path.value}",
        passed=execution.passed,
        message=f"{execution.path.title}: {execution.reason()}",
        duration=execution.result.duration,
        output=execution.result.output(),
    )


def prediction_check(
    artifact: str,
    listing: Listing,
    cap: Capability,
    driver: Version | None,
    executions: Sequence[Execution],
) -> Check:
    """Compare what ran with what inspection predicted; a mismatch needs explaining."""
    prediction = listing.predict(cap, driver)
    expected = {
        ExecPath.NATIVE: prediction.native,
        ExecPath.JIT: bool(prediction.kernels)
        and all(_jit_ok(driver, listing, k.kernel, cap) for k in prediction.kernels),
    }
    mismatches = [
        f"{e.path.value} {'passed' if e.passed else 'failed'} but inspection predicted it would "
        f"{'pass' if expected[e.path] else 'fail'}"
        for e in executions
        if e.passed != expected[e.path]
    ]
    detail = "; ".join(mismatches)
    if any(m.startswith("native passed") for m in mismatches):
        detail += (
            " (something let code other than the artifact's SASS run: a JIT cache, "
            "a library loaded at run time, or code generated at run time)"
        )
    return Check(
        f"{artifact}: execution matches inspection on {cap}",
        "gate.predict",
        not mismatches,
        detail
        or f"native {'ok' if expected[ExecPath.NATIVE] else 'fails'} and JIT "
        f"{'ok' if expected[ExecPath.JIT] else 'fails'}, as predicted",
    )


def _jit_ok(driver: Version | None, listing: Listing, kernel: str, cap: Capability) -> bool:
    """Under forced JIT the driver ignores SASS: the kernel needs usable PTX."""
    ptx = [
        e for e in listing.of_kind(Kind.PTX) if kernel in e.kernels and e.target.ptx_jits_for(cap)
    ]
    if not ptx:
        return False
    needed = [min_driver_for_ptx(e.ptx_isa) for e in ptx if e.ptx_isa]
    return driver is None or any(n is None or driver >= n for n in needed) or not needed


def diagnose(
    executions: Sequence[Execution],
    listing: Listing | None,
    cap: Capability | None,
    driver: Version | None,
) -> list[str]:
    """The seed's diagnosis for each failure combination, with the evidence behind it."""
    by_path: dict[str, list[Execution]] = {}
    for e in executions:
        by_path.setdefault(e.entry_point.name, []).append(e)
    out: list[str] = []
    for name, runs in by_path.items():
        native = next((e for e in runs if e.path is ExecPath.NATIVE), None)
        jit = next((e for e in runs if e.path is ExecPath.JIT), None)
        if native is None or jit is None or (native.passed and jit.passed):
            continue
        sass = _names(listing.targets(Kind.SASS)) if listing else "unknown"
        ptx = _ptx_summary(listing) if listing else "unknown"
        if not native.passed and jit.passed:
            out.append(
                f"{name}: native fails ({native.reason()}) but PTX JIT passes: revisit the native "
                f"target and the final link step. SASS in the artifact: {sass}; device {cap}."
            )
        elif native.passed and not jit.passed:
            isa_note = ""
            if jit.failure is RuntimeFailure.UNSUPPORTED_PTX:
                isa_note = f" The driver (CUDA {driver}) is older than the PTX ISA needs."
            out.append(
                f"{name}: native passes but PTX JIT fails ({jit.reason()}): check that PTX is "
                f"present and that the driver supports its ISA version. PTX in the artifact: "
                f"{ptx}; driver CUDA {driver or 'unknown'}.{isa_note}"
            )
        else:
            out.append(
                f"{name}: both paths fail (native: {native.reason()}; JIT: {jit.reason()}): "
                "investigate the toolchain, runtime libraries and device state using these "
                f"errors. SASS: {sass}; PTX: {ptx}; device {cap}."
            )
    return out


def _ptx_summary(listing: Listing) -> str:
    parts = []
    for e in listing.of_kind(Kind.PTX):
        need = min_driver_for_ptx(e.ptx_isa) if e.ptx_isa else None
        text = f"{e.target} ISA {e.ptx_isa or '?'}"
        parts.append(text + (f" (driver >= {need})" if need else ""))
    return ", ".join(dict.fromkeys(parts)) or "none"


def verdict(checks: Sequence[Check], executed: bool, blocked: str | None = None) -> Verdict:
    """Accepted only when every check passed and both paths ran for every entry point.

    ``blocked`` names the error that stopped the pipeline early (a missing nvcc, say).
    """
    reasons = [f"{c.name}: {c.message}" for c in checks if not c.passed and not c.skipped]
    if blocked:
        reasons.insert(0, blocked)
    if not executed:
        reasons.append("execution not verified")
    if not reasons:
        return Verdict(True, ACCEPTED_STATEMENT, ())
    headline = blocked or ("execution not verified" if not executed else reasons[0])
    return Verdict(False, f"not accepted: {headline}", tuple(reasons))
