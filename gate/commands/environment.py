"""`cuda-gate inspect` on an environment: one verdict line per distribution per device.

Reached from :mod:`gate.commands.inspect` when a path is a virtual environment, a
site-packages folder, a folder of wheels or a requirements lock (or with
``--by-distribution``). ``--require-device`` fails the distributions that cannot run
there, one line each; a distribution with no device code needs no device.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from gate.commands.stdout import Stdout
    from gate.reader.distributions import Audit
    from gate.reader.limits import Limits
    from gate.reader.verdicts import DistributionVerdict
    from gate.rules.targets import Capability, Version


def handle(
    args: argparse.Namespace,
    caps: list[Capability],
    required: list[Capability],
    limits: Limits,
    out: Stdout,
) -> None:
    """Read and judge every distribution, print the report, raise the exit's error."""
    from gate.reader.distributions import audit_paths

    names = args.names or args.strict
    audit = audit_paths(
        [Path(p) for p in args.paths],
        names=names,
        scan=not args.no_scan,
        limits=limits,
        cache=names and not args.no_cache,
    )
    report(args, audit, caps, required, out)


def report(
    args: argparse.Namespace,
    audit: Audit,
    caps: list[Capability],
    required: list[Capability],
    out: Stdout,
) -> None:
    """Judge the groups of an audit already read (by :func:`audit_paths`, or an image laid
    out in a folder and read by :func:`gate.reader.distributions.audit_root`), print the
    table or the JSON document, raise the exit's error (BadInputError, NotAcceptedError)."""
    from gate.reader import envview
    from gate.reader.verdicts import judge_all

    names = args.names or args.strict
    runtime = _runtime(args.cuda_runtime)
    verdicts = judge_all(audit.groups, caps, runtime=runtime, strict=args.strict)
    errors = [*audit.errors, *(e for v in verdicts for e in v.errors)]
    for error in errors:
        print(f"cuda-gate: error: {error}", file=sys.stderr, flush=True)
    if not args.json and verdicts:
        out.write(envview.console(verdicts, caps, verbose=args.verbose, runtime=runtime))
    unmet = [line for v in verdicts for line in _unmet(v, required)]
    for line in unmet:
        print(f"cuda-gate: error: {line}", file=sys.stderr, flush=True)
    if args.json or args.output:
        doc = envview.document(
            verdicts, caps, errors, names=names, scan=not args.no_scan, runtime=runtime
        )
        _write(args, doc, out)
    out.flush()
    _exit(args, verdicts, errors, unmet, required)


def _runtime(text: str | None) -> Version | None:
    from gate.rules.targets import Version

    return Version.parse(text) if text else None


def _unmet(v: DistributionVerdict, required: list[Capability]) -> list[str]:
    """One line per required device the distribution cannot run on."""
    dist = v.group.distribution
    lines = []
    for dev in v.devices:
        if dev.capability not in required or dev.passes:
            continue
        failing = [p for p in dev.parts if not p.outcome.passes]
        shown = ", ".join(p.name for p in failing[:3]) + (
            f", +{len(failing) - 3} more" if len(failing) > 3 else ""
        )
        lines.append(
            f"{dist.name} {dist.version}: does not run on {dev.capability}: "
            f"nothing runs there in {shown}"
        )
    return lines


def _write(args: argparse.Namespace, doc: dict[str, Any], out: Stdout) -> None:
    import json

    from gate.fsutil import write_atomic

    text = json.dumps(doc, indent=1) + "\n"
    if args.json:
        out.write(text)
    if args.output:
        write_atomic(args.output, text.encode("utf-8"))


def _exit(
    args: argparse.Namespace,
    verdicts: tuple[DistributionVerdict, ...],
    errors: list[str],
    unmet: list[str],
    required: list[Capability],
) -> None:
    from gate.errors import BadInputError, NotAcceptedError

    if not verdicts and not errors:
        shown = ", ".join(str(p) for p in args.paths)
        raise BadInputError(f"{shown}: no distribution and no artifact found")
    if errors:
        raise BadInputError(f"{len(errors)} error(s) reading the environment")
    if unmet:
        devices = ", ".join(str(c) for c in required)
        raise NotAcceptedError(
            f"{len(unmet)} distribution/device pair(s) that cannot run on a required "
            f"device ({devices})"
        )
