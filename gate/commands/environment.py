"""`cuda-gate inspect` on an environment: one verdict line per distribution per device.

Reached from :mod:`gate.commands.inspect` when a path is a virtual environment, a
site-packages folder, a folder of wheels, a requirements lock or a container image (or
with ``--by-distribution``). ``--require-device`` fails the distributions that cannot
run there, one line each; a distribution with no device code needs no device. An image
adds its line above the table, each artifact's layer with ``--verbose``, and in the JSON
document ``images`` and, per distribution, ``image`` (:mod:`gate.image.environment`).
"""

from __future__ import annotations

import argparse
import sys
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from gate.audit.verdicts import DistributionVerdict
    from gate.commands.stdout import Stdout
    from gate.image.environment import Located
    from gate.reader.distributions import Audit
    from gate.reader.limits import Limits
    from gate.rules.targets import Capability, Version


def handle(
    args: argparse.Namespace,
    caps: list[Capability],
    required: list[Capability],
    limits: Limits,
    out: Stdout,
) -> None:
    """Read and judge every distribution, print the report, raise the exit's error."""
    from gate.image.environment import Reading, audit_sources
    from gate.reader.locks import target

    names = args.names or args.strict
    how = Reading(
        names=names,
        scan=not args.no_scan,
        limits=limits,
        cache=names and not args.no_cache,
        platform=args.platform,
        digests=False,  # shown nowhere: only a run's launch accounting needs them
        audited=target(args.python_platform, args.python_version),
    )
    located = audit_sources([str(p) for p in args.paths], how)
    report(args, located.audit, caps, required, out, located=located)


def report(
    args: argparse.Namespace,
    audit: Audit,
    caps: list[Capability],
    required: list[Capability],
    out: Stdout,
    *,
    located: Located | None = None,
) -> None:
    """Judge the groups of an audit already read (by :func:`audit_paths`, or an image laid
    out in a folder and read by :func:`gate.reader.distributions.audit_root`), print the
    table or the JSON document, raise the exit's error (BadInputError, NotAcceptedError).

    ``located`` (the same audit with the images read and each group's place in one) adds
    the image lines, the layers (``--verbose``) and the JSON's ``images`` and ``image``."""
    from gate.audit.verdicts import judge_all
    from gate.render import environment as envview

    names = args.names or args.strict
    runtime = _runtime(args.cuda_runtime)
    verdicts = judge_all(audit.groups, caps, runtime=runtime, strict=args.strict)
    errors = [*audit.errors, *(e for v in verdicts for e in v.errors)]
    for error in errors:
        print(f"cuda-gate: error: {error}", file=sys.stderr, flush=True)
    for warning in audit.warnings:
        print(f"cuda-gate: warning: {warning}", file=sys.stderr, flush=True)
    if not args.json and audit.notes:
        out.write("".join(f"{note}\n" for note in audit.notes))
    places = located.places if located else (None,) * len(verdicts)
    if not args.json and located and located.images:
        from gate.image.reports import image_console  # an image's modules: only for one

        out.write("".join(image_console(image) for image in located.images))
    if not args.json and verdicts:
        notes = [place.lines() if place else () for place in places]
        text = envview.console(verdicts, caps, verbose=args.verbose, runtime=runtime, notes=notes)
        out.write(text)
    unmet = [line for v in verdicts for line in _unmet(v, required)]
    for line in unmet:
        print(f"cuda-gate: error: {line}", file=sys.stderr, flush=True)
    if args.json or args.output:
        from gate.render.environment_json import document

        doc = document(
            verdicts,
            caps,
            errors,
            names=names,
            scan=not args.no_scan,
            runtime=runtime,
            locks=audit.locks,
            warnings=audit.warnings,
        )
        if located and located.images:
            doc["images"] = [image.to_json() for image in located.images]
            for dist, place in zip(doc["distributions"], places, strict=True):
                dist["image"] = place.to_json() if place else None
        _write(args, doc, out)
    out.flush()
    _exit(args, verdicts, errors, unmet, required)


def _runtime(text: str | None) -> Version | None:
    from gate.rules.targets import Version

    return Version.parse(text) if text else None


def _unmet(v: DistributionVerdict, required: list[Capability]) -> list[str]:
    """One line per required device the distribution cannot run on."""
    from gate.render.environment import unmet_lines

    return unmet_lines(v, required)


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
            f"{len(unmet)} distribution/device pair(s) not known to run on a required "
            f"device ({devices})"
        )
