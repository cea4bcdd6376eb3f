"""The inspect stage's checks on one inspected artifact (gate.stages.inspected).

Per artifact the seed's checks: the host ELF machine, the required targets as SASS
and as PTX, the required kernels in both, every kernel in every target, PTX headers,
and (when the driver is known) whether the driver can JIT the PTX's ISA; then the
release policy's (gate.stages.policycheck), the trap stubs' (gate.stages.stubcheck)
and, where cuobjdump ran, whether it agrees with our reader.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Sequence

from gate.demangle import demangle
from gate.evidence import EvidenceDir
from gate.reader.listing import Kind, Listing
from gate.render.text import count
from gate.rules.causes import Cause, ExecPath
from gate.rules.hosts import HostRule
from gate.rules.kernels import describe, matching, parse, readable
from gate.rules.policy import DEFAULT_POLICY, Action, ReleasePolicy
from gate.rules.remedies import Situation, lto_only, remedy
from gate.rules.require import Requirement, why_not
from gate.rules.routes import general, jit_support, min_driver
from gate.rules.targets import Capability, Target, Version
from gate.rules.verdict import Check, CheckState
from gate.stages.inspected import Inspected
from gate.stages.policycheck import policy_checks, sass_optional, stand_in_entries
from gate.stages.stubcheck import stub_check
from gate.tools import cuobjdump

_SASS_FUNCTION = re.compile(r"^\s*Function : \S", re.MULTILINE)


def artifact_checks(
    artifact: Inspected,
    evidence: EvidenceDir,
    host: HostRule,
    required: Sequence[Requirement],
    driver_cuda: Version | None,
    *,
    devices: Sequence[Capability] = (),
    policy: ReleasePolicy = DEFAULT_POLICY,
    must_run: Sequence[Capability] = (),
    runner_class: str | None = None,
) -> list[Check]:
    """Every check on one artifact; an artifact without device code of its own gets fewer,
    and fails when kernels are required of it. ``devices``: those its trap stubs are
    judged for (gate.stages.stubcheck); ``policy`` the release policy it is judged by,
    ``must_run`` the devices it requires of ``runner_class`` (gate.stages.policycheck)."""
    has_code = artifact.smoke or bool(artifact.listing.entries)
    checks = [host_check(artifact, host)]
    if has_code:
        name, listing = artifact.name, artifact.listing
        checks += content_checks(artifact, evidence, policy)
        for requirement in required:
            checks += listing_checks(name, listing, requirement, artifact.kernels, policy)
        checks.append(coverage_check(name, listing))
        stubs = stub_check(name, listing, devices, trap_stubs=policy.trap_stubs)
        checks += [stubs] if stubs is not None else []
        checks += driver_checks(name, listing, required, driver_cuda)
        checks += policy_checks(
            name,
            listing,
            required,
            policy,
            devices=must_run,
            runner_class=runner_class,
            driver=driver_cuda,
        )
    elif artifact.kernels and not artifact.in_wheel:
        checks.append(
            Check(
                f"{artifact.name}: kernels {', '.join(artifact.kernels)}",
                "gate.inspect",
                CheckState.FAILED,
                "required of it, but it holds no device code",
                cause=Cause.MISSING_KERNEL,
            )
        )
    if artifact.cross_check is not None:
        checks.append(cross_check(artifact))
    return checks


def host_check(artifact: Inspected, host: HostRule) -> Check:
    """The artifact's ELF machine is the one its host runs (gate.rules.hosts)."""
    ok = artifact.host.matches_host(host.host) and host.conflict is None
    machine = artifact.host.machine_text
    if host.conflict is not None:
        message = f"{machine}: {host.conflict}"
    elif ok:
        message = f"{machine} matches {host.host} ({host.reason})"
    else:
        message = f"{machine} does not run on {host.host} ({host.reason})"
    return Check(
        f"{artifact.name}: host ELF machine",
        "gate.inspect",
        CheckState.of(ok),
        message,
        cause=None if ok else Cause.HOST_ARCH,
        # The host it must run on, as the configuration or the device decides it; a
        # configuration that contradicts the device says so in the message instead.
        remedy=remedy(Situation(Cause.HOST_ARCH, host=host.host))
        if not ok and host.conflict is None
        else None,
    )


# Per evidence file: its name, what it must hold, and the test of its text.
Holds = tuple[tuple[str, str, Callable[[str], bool]], ...]


def holds_checks(evidence: EvidenceDir, name: str, prefix: str, holds: Holds) -> list[Check]:
    """For each (file, what, test) whose file exists: the check that it holds ``what``.

    A file not written (no cuobjdump, or its SASS dump still running) gives no check.
    """
    checks = []
    for file_name, what, test in holds:
        path = evidence.path(prefix + file_name)
        if not path.exists():
            continue
        ok = test(path.read_text(encoding="utf-8", errors="replace"))
        checks.append(
            Check(
                f"{name}: {what}",
                "gate.inspect",
                CheckState.of(ok),
                f"{prefix}{file_name} has it" if ok else f"{prefix}{file_name} has none",
                cause=None if ok else Cause.NO_DEVICE_CODE,
            )
        )
    return checks


def content_checks(
    artifact: Inspected, evidence: EvidenceDir, policy: ReleasePolicy = DEFAULT_POLICY
) -> list[Check]:
    """The listings and dumps hold what their names say: ELF entries, SASS code, PTX text.

    ``sass.txt`` with only cuobjdump's "Fatbin ptx code" header is not a SASS dump. An
    artifact of PTX alone that the policy accepts as device code is asked for no cubin
    and no SASS (:func:`gate.stages.policycheck.sass_optional`).
    """
    cls, name, prefix = "gate.inspect", artifact.name, artifact.prefix
    holds = (*_LISTING_HOLDS, *SASS_HOLDS)
    if sass_optional(artifact.listing, policy):
        holds = tuple(h for h in holds if h not in (_LISTS_CUBIN, *SASS_HOLDS))
    checks = holds_checks(evidence, name, prefix, holds)
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
                CheckState.of(not missing),
                f".version {module.version}, .target {module.target}, "
                f"{count(len(module.entries), 'entry', 'entries')}"
                if not missing
                else f"PTX {module.arch} lacks {', '.join(missing)}",
                cause=Cause.INVALID_PTX if missing else None,
            )
        )
    return checks


def _lists_cubin(text: str) -> bool:
    return bool(cuobjdump.parse_list(text, "ELF"))


def _holds_ptx(text: str) -> bool:
    return ".target" in text or ".entry" in text


def _holds_sass(text: str) -> bool:
    return bool(_SASS_FUNCTION.search(text))


_LISTS_CUBIN = ("elf-list.txt", "ELF listing lists a cubin", _lists_cubin)
_LISTING_HOLDS: Holds = (
    _LISTS_CUBIN,
    ("ptx.txt", "PTX dump holds PTX", _holds_ptx),
)
SASS_HOLDS: Holds = (("sass.txt", "SASS dump holds SASS", _holds_sass),)


def listing_checks(
    artifact: str,
    listing: Listing,
    requirement: Requirement,
    kernels: Sequence[str],
    policy: ReleasePolicy = DEFAULT_POLICY,
) -> list[Check]:
    """The seed's inspection checks: the target and the kernels, in SASS and in PTX.

    What satisfies the required target is the decision core's table
    (gate.rules.require); a kernel is matched by its whole name (gate.rules.kernels),
    and the check names the kernel it matched. What a missing target does is the
    release policy's: ``missing_sass`` and ``missing_ptx`` (fail, warn; PTX also
    allow), and ``ptx_as_device_code``, under which PTX that JIT-compiles for the
    target stands in for its SASS (a warning: the first launch JIT-compiles).
    """
    checks = []
    for kind, label, cause in (
        (Kind.SASS, requirement.sass_label(), Cause.MISSING_SASS),
        (Kind.PTX, requirement.ptx_label(), Cause.MISSING_PTX),
    ):
        ptx = kind is Kind.PTX
        action = policy.missing_ptx if ptx else policy.missing_sass
        key = "missing_ptx" if ptx else "missing_sass"
        matching = [e for e in listing.of_kind(kind) if requirement.satisfied_by(e.target)]
        # A kernel-less entry (nvcc's device-link stub) is no kernel's code: where the
        # artifact has kernels, only an entry holding some stands for the target.
        entries = [e for e in matching if e.kernels or not listing.kernels()]
        found = tuple(dict.fromkeys(e.target for e in entries))
        where = f"{label} {kind.value}"
        state = CheckState.PASSED
        if entries:
            isa = f" (ISA {entries[0].ptx_isa})" if ptx and entries[0].ptx_isa else ""
            message = f"{kind.value} for {label} present: {_names(found)}{isa}"
        else:
            if matching:
                stubs = _names(tuple(dict.fromkeys(e.target for e in matching)))
                message = f"no {kind.value} for {label}: only kernel-less entries ({stubs})"
            else:
                message = _lto_only(listing) or why_not(requirement, listing.targets(kind), ptx=ptx)
            standing = (
                ()
                if ptx or not policy.ptx_as_device_code
                else stand_in_entries(listing, requirement)
            )
            if standing:
                entries = list(standing)
                shown = _names(tuple(dict.fromkeys(e.target for e in standing)))
                where = f"{shown} PTX (standing in for {label} SASS)"
                state = CheckState.WARNED
                message += (
                    f"; {shown} PTX stands in as device code (policy.ptx_as_device_code = "
                    "true): the driver JIT-compiles it at the first launch"
                )
            else:
                state = action.state(found=True)
                message += (
                    f' (policy.{key} = "{action.value}")' if action is not Action.FAIL else ""
                )
        checks.append(
            Check(
                f"{artifact}: {kind.value} for {label}",
                "gate.inspect",
                state,
                message,
                cause=cause if state is CheckState.FAILED else None,
                path=ExecPath.JIT if ptx else ExecPath.NATIVE,
                # LTO IR alone is device-linked, not rebuilt with another arch list.
                remedy=lto_only(requirement.target)
                if state is CheckState.FAILED and _lto_only(listing)
                else None,
            )
        )
        if not entries and not action.judged:
            continue  # an allowed absence: no kernel is looked for in code that is not there
        names = {k for e in entries for k in e.kernels}
        for kernel in kernels:
            if not entries:
                # No code for the target at all: its own check above says so, once; a
                # kernel cannot be looked for in code that is not there.
                checks.append(_kernel_not_looked_for(artifact, kernel, where, ptx=ptx))
                continue
            checks.append(_kernel_check(artifact, kernel, names, where, ptx=ptx))
    return checks


def _kernel_not_looked_for(artifact: str, wanted: str, where: str, *, ptx: bool) -> Check:
    """A required kernel in a target the artifact has no code for: not looked for."""
    return Check(
        f"{artifact}: kernel {wanted} in {where}",
        "gate.inspect",
        CheckState.NOT_RUN,
        f"not looked for: no {where} at all",
        path=ExecPath.JIT if ptx else ExecPath.NATIVE,
    )


def _kernel_check(artifact: str, wanted: str, names: set[str], where: str, *, ptx: bool) -> Check:
    """One required kernel in one target's SASS or PTX: which kernel matched, or why none."""
    found = matching(wanted, names)
    if found:
        message = f"{wanted} present in {where} as {describe(found)}"
    else:
        alike = sorted(n for n in names if wanted in (parse(n).function or n))[:3]
        hint = f" (kernels named like it: {describe(tuple(alike))})" if alike else ""
        message = f"{wanted} missing from {where}{hint}"
    present = tuple(sorted({parse(n).function or demangle(n) for n in names}))
    return Check(
        f"{artifact}: kernel {wanted} in {where}",
        "gate.inspect",
        CheckState.of(bool(found)),
        message,
        cause=None if found else Cause.MISSING_KERNEL,
        path=ExecPath.JIT if ptx else ExecPath.NATIVE,
        remedy=None
        if found
        else remedy(Situation(Cause.MISSING_KERNEL, kernel=wanted, kernels=present)),
    )


def _lto_only(listing: Listing) -> str | None:
    """The reason when the artifact holds LTO IR and nothing that can run."""
    lto = listing.targets(Kind.LTOIR)
    if not lto or listing.targets(Kind.SASS) or listing.has_ptx:
        return None
    shown = " ".join(f"lto_{t.number}{t.variant.value}" for t in lto)
    return f"LTO IR only ({shown}): it runs nowhere until it is device-linked; device-link it first"


def coverage_check(name: str, listing: Listing) -> Check:
    """Per kernel of the plain builds: present for one target but missing from another
    (gate.reader.listing.missing_by_target); a kernel only in a/f builds is expected
    nowhere else and is counted apart."""
    missing = listing.missing_kernels()
    by_kernel: dict[str, list[str]] = {}
    for target, kernels in missing.items():
        for kernel in kernels:
            by_kernel.setdefault(kernel, []).append(target)
    shown = list(by_kernel.items())[:5]
    said = readable(k for k, _ in shown)
    detail = "; ".join(f"{said[k]} missing from {', '.join(ts)}" for k, ts in shown)
    if len(by_kernel) > 5:
        detail += f"; and {count(len(by_kernel) - 5, 'more kernel', 'more kernels')}"
    general_builds = {
        k
        for e in listing.entries
        if e.kind is not Kind.LTOIR and general(e.target)
        for k in e.kernels
    }
    special = len(listing.kernels()) - len(general_builds)
    extra = f"; {count(special, 'kernel')} only in a/f builds" if special else ""
    return Check(
        f"{name}: every kernel for every target",
        "gate.inspect",
        CheckState.of(not by_kernel),
        f"{count(len(general_builds), 'kernel', 'kernels')} in every plain SASS and PTX target"
        + extra
        if not by_kernel
        else detail,
        cause=Cause.MISSING_KERNEL if by_kernel else None,
    )


def driver_checks(
    name: str, listing: Listing, required: Sequence[Requirement], driver_cuda: Version | None
) -> list[Check]:
    """The driver can JIT the required targets' PTX (gate.rules.routes.jit_support).

    One check per required target that has PTX with an ISA; none where the driver is not
    known. Where the rules cannot tell (an ISA and a driver both newer than they know),
    the check warns.
    """
    if driver_cuda is None:
        return []
    checks = []
    for requirement in required:
        entries = [
            e
            for e in listing.of_kind(Kind.PTX)
            if requirement.satisfied_by(e.target) and e.ptx_isa is not None
        ]
        if not entries:
            continue
        entry = entries[0]
        assert entry.ptx_isa is not None  # noqa: S101 - filtered above
        support = jit_support(entry.ptx_isa, driver_cuda)
        need = min_driver(entry.ptx_isa)
        needs = f"driver CUDA >= {need}" if need else "a driver newer than the rules know"
        state = CheckState.WARNED if support is None else CheckState.of(support)
        checks.append(
            Check(
                f"{name}: driver can JIT {entry.target} PTX",
                "gate.inspect",
                state,
                f"PTX ISA {entry.ptx_isa} needs {needs}; the driver is CUDA {driver_cuda}"
                + ("; the rules cannot tell whether it can" if support is None else ""),
                cause=Cause.PTX_NEEDS_DRIVER if support is False else None,
                path=ExecPath.JIT,
                remedy=remedy(
                    Situation(Cause.PTX_NEEDS_DRIVER, driver=driver_cuda, driver_needed=need)
                )
                if support is False
                else None,
            )
        )
    return checks


def cross_check(artifact: Inspected) -> Check:
    """The cuobjdump cross-check as a check (only where it ran: see ``cross_check_note``)."""
    name = f"{artifact.name}: cuobjdump agrees with the cuda-gate reader"
    assert artifact.cross_check is not None  # noqa: S101 - the caller checks
    issues = artifact.cross_check.disagreements
    return Check(
        name,
        "gate.inspect",
        CheckState.of(not issues),
        f"{artifact.cross_check.tool}: same kinds, archs, order and kernel names"
        if not issues
        else "; ".join(issues[:5]) + (" ..." if len(issues) > 5 else ""),
        cause=Cause.CROSS_CHECK if issues else None,
    )


def _names(targets: Iterable[Target]) -> str:
    return " ".join(str(t) for t in targets) or "none"
