"""`cuda-gate inspect`: list the device code of artifacts with our own reader, no toolkit needed.

Headers only by default (fast: no decompression): kinds, targets with their ``a``/``f``
variant, PTX ISA, sizes, and per device a route per target (standing for every kernel).
``--names`` decompresses every entry for kernel names: kernel counts per target, kernels
missing from some target (shown demangled; the JSON keeps them mangled), and the route
each kernel takes per device. ``--require-device`` turns a device without code into exit 1,
by the rule the run judges libraries by (gate.rules.environment.unmet): something in each
file runs there (one that runs partly passes), or with ``--strict`` every kernel built for
that device does; a distribution's libraries are judged by the same rule. A file with
nothing to judge (no device code, LTO IR only) and a path with no file at all fail too; a
wheel's member with no device code needs no device, as in its distribution.

A virtual environment, a site-packages folder, a folder of wheels, a requirements lock or
a container image (or any path with ``--by-distribution``) is read by distribution instead
(:mod:`gate.commands.environment`): one verdict line per distribution per device. An image
is an environment: its Python distributions and its other libraries by folder, each
file's layer kept; ``--files`` (``--by-file``) gives every path, images too, the per-file
table.

A wheel is one distribution: its files are read as any path's are (the JSON document,
the error lines and the exit status are the per-file ones), and shown as the table a
folder of wheels gets (:mod:`gate.render.environment`), unless ``--files``.
"""

from __future__ import annotations

import argparse
import contextlib
import functools
import gc
import io
import sys
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from gate.commands.stdout import Stdout
    from gate.image.reports import Found
    from gate.reader.limits import Limits
    from gate.reader.read import ArtifactReport
    from gate.render.live import Counter


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add the `inspect` subcommand."""
    parser: argparse.ArgumentParser = subparsers.add_parser(
        "inspect",
        help="list the SASS, PTX and LTO IR inside artifacts, and what runs where",
        description="List every device-code entry of ELF files, static archives, wheels "
        "(every .so inside, read from the zip), raw cubins and fatbins, and folders of "
        "them; predict the route each kernel takes per device. Needs no CUDA toolkit.",
    )
    parser.add_argument(
        "paths",
        nargs="+",
        type=str,  # not Path: it would fold the "//" of a transport such as docker://
        metavar="PATH",
        help="files and folders; and container images: an OCI layout folder, an oci-archive "
        "or docker-archive tarball (recognised by content, or named oci:DIR, oci-archive:TAR, "
        "docker-archive:TAR), or a local runtime's image as podman:NAME or docker:NAME",
    )
    parser.add_argument(
        "--platform",
        type=_platform,
        default=None,
        metavar="OS/ARCH",
        help="the image to read from a multi-platform index, as linux/arm64 or linux/arm/v7 "
        "(default: the only one, else this machine's)",
    )
    parser.add_argument(
        "--device",
        action="append",
        type=_capability_text,
        default=None,
        metavar="CAP",
        help="a device capability (12.1, 121 or sm_121); repeat for several "
        "(default: the GPU nvidia-smi reports, if any)",
    )
    parser.add_argument(
        "--require-device",
        action="append",
        type=_capability_text,
        default=[],
        metavar="CAP",
        help="fail (exit 1, one line per failing artifact) when nothing in an artifact runs "
        "on this device (no SASS that runs there, no PTX that JITs for it), as the run judges "
        "vendor libraries: one where only some kernels built for the device have code there "
        "(a library that picks its kernels per device) passes, shown as partly; a "
        "distribution fails when one of its libraries does, by the same rule; an artifact "
        "with no device code, or LTO IR only, fails too (not a wheel's member: it needs no "
        "device, as in its distribution); also shown like --device; repeatable",
    )
    parser.add_argument(
        "--strict",
        action="store_true",
        help="with --require-device, judge every kernel as the run judges the project's own "
        "code: each kernel built for the device needs code there, in a file and in a "
        "distribution alike (partly fails, naming the kernels without code; a kernel only in "
        "a/f builds for other devices is not expected); implies --names",
    )
    parser.add_argument(
        "--no-detect", action="store_true", help="do not ask nvidia-smi for the local GPU"
    )
    _reading_options(parser)
    _limit_options(parser)
    parser.add_argument(
        "--no-cache",
        action="store_true",
        help="with --names, read every file even if the inspection cache holds its report "
        "(by SHA-256, reader version and mode; $CUDA_GATE_CACHE_DIR, else "
        "$XDG_CACHE_HOME/cuda-gate, else ~/.cache/cuda-gate)",
    )
    _environment_options(parser)
    parser.add_argument("--json", action="store_true", help="print one JSON document")
    parser.add_argument(
        "--output", type=Path, default=None, help="also write the JSON document to this file"
    )
    parser.set_defaults(handler=handle)


def _reading_options(parser: argparse.ArgumentParser) -> None:
    """What is read: kernel names, and the sections besides .nv_fatbin."""
    parser.add_argument(
        "--names",
        action="store_true",
        help="decompress every entry for kernel names: kernel counts, missing kernels, "
        "per-kernel routes (slower on large libraries)",
    )
    parser.add_argument(
        "--no-scan",
        action="store_true",
        help="read only .nv_fatbin (or __nv_relfatbin), as cuobjdump does; by default other "
        "data sections are scanned for fatbin containers too",
    )


def _limit_options(parser: argparse.ArgumentParser) -> None:
    """The bounds on decompression, each also from an environment variable."""
    limits = parser.add_argument_group(
        "bounds on decompression",
        "Each also comes from an environment variable; an option overrides it. A file past "
        "a bound gets one error line saying which bound to raise.",
    )
    for option, field, default, what in (
        ("--max-entry-mb", "entry", "256", "one fatbin entry, decompressed"),
        ("--max-artifact-mb", "artifact", "16384", "all entries of one artifact, decompressed"),
        ("--max-member-mb", "member", "4096", "one wheel member or image file, inflated on disk"),
        ("--max-ratio", "ratio", "200", "decompressed per compressed byte, past 64 MB"),
    ):
        limits.add_argument(
            option,
            metavar="N",
            default=None,
            help=f"{what} (default {default}; ${_env(field)})",
        )


def _environment_options(parser: argparse.ArgumentParser) -> None:
    """How paths are grouped (by distribution or file by file) and what an environment's
    table says."""
    env = parser.add_argument_group(
        "environments",
        "A virtual environment, a site-packages folder, a folder of wheels, a requirements "
        "lock (name==version lines, wheels beside it) or a container image is read by "
        "distribution: one verdict line per distribution per device and a summary (an "
        "image's distributions in any site-packages or dist-packages folder, its other "
        "libraries by folder); --require-device then fails distributions, and one with no "
        "device code needs none.",
    )
    how = env.add_mutually_exclusive_group()
    how.add_argument(
        "--by-distribution",
        action="store_true",
        help="read every PATH by distribution (wheels, folders), even one that is no environment",
    )
    how.add_argument(
        "--files",
        "--by-file",
        dest="by_file",
        action="store_true",
        help="read every PATH file by file, wheels, environments and images too: one table "
        "per artifact, an image's files named SOURCE!/path with their layer",
    )
    env.add_argument(
        "--cuda-runtime",
        type=_runtime_text,
        default=None,
        metavar="X.Y",
        help="the CUDA runtime that loads builds chosen by runtime (libx_cuda128.so): only "
        "the build named for it counts (default: every build, best first)",
    )
    env.add_argument(
        "--python-platform",
        type=functools.partial(_lock_target, field="python_platform"),
        default=None,
        metavar="TRIPLE",
        help="the platform a requirements lock is audited for, as uv names it: "
        "aarch64-unknown-linux-gnu, x86_64-unknown-linux-gnu, aarch64-manylinux_2_28, "
        "aarch64-apple-darwin, x86_64-pc-windows-msvc, or linux, macos, windows; its "
        "markers are evaluated for it and each chosen wheel's tags checked against it "
        "(default: this machine)",
    )
    env.add_argument(
        "--python-version",
        type=functools.partial(_lock_target, field="python_version"),
        default=None,
        metavar="X.Y",
        help="the Python a requirements lock is audited for (default: this one's)",
    )
    env.add_argument(
        "--verbose",
        action="store_true",
        help="list every group of identical artifacts and every name, and for an image "
        "each artifact's layer",
    )


def _env(field: str) -> str:
    from gate.reader.limits import ENV

    return ENV[field]


def _limits(args: argparse.Namespace) -> Limits:
    """The reader's bounds: options, then CUDA_GATE_MAX_* variables, then the defaults
    (every value given is checked, options first: gate.config.options)."""
    import os

    from gate.config import options as o
    from gate.reader.limits import Limits

    fields = ("entry", "artifact", "member", "ratio")
    bounds = (o.MAX_ENTRY_MB, o.MAX_ARTIFACT_MB, o.MAX_MEMBER_MB, o.MAX_RATIO)
    found = o.resolve_all(bounds, args, os.environ)
    return Limits().overridden(**dict(zip(fields, (r.value for r in found), strict=True)))


def _platform(text: str) -> Any:  # noqa: ANN401  (a Platform: imported only when used)
    """An image platform as typed, refused when malformed (argparse type: exit 2)."""
    from gate.errors import ConfigError
    from gate.image.platforms import Platform

    try:
        return Platform.parse(text)
    except ConfigError as e:
        raise argparse.ArgumentTypeError(e.message) from e


def _capability_text(text: str) -> str:
    """A device as typed, refused when it is no capability (argparse type: exit 2).

    A bare ``13`` or ``9`` is refused as ambiguous (1.3 or 13.0?): write ``13.0``.
    """
    from gate.errors import ConfigError
    from gate.rules.targets import parse_target_or_capability

    try:
        parse_target_or_capability(text)
    except ConfigError as e:
        raise argparse.ArgumentTypeError(e.message) from e
    return text


def _lock_target(text: str, *, field: str) -> str:
    """A platform (uv's names) or Python version (3.12) a lock is audited for, ``field``
    naming which of gate.reader.locks.target's arguments it is; refused as that refuses
    it (argparse type: exit 2)."""
    from gate.reader.locks import target

    given: dict[str, str | None] = {"python_platform": None, "python_version": None}
    given[field] = text
    try:
        target(**given)
    except ValueError as e:
        raise argparse.ArgumentTypeError(str(e)) from e
    return text


def _runtime_text(text: str) -> str:
    """A CUDA runtime version (12.8), refused when it is none (argparse type: exit 2)."""
    from gate.errors import ConfigError
    from gate.rules.targets import Version

    try:
        Version.parse(text)
    except ConfigError as e:
        raise argparse.ArgumentTypeError(e.message) from e
    return text


def handle(args: argparse.Namespace) -> int:
    """Read every artifact, print the table or the JSON document; BadInputError at the end."""
    with _few_collections():
        return _handle(args)


@contextlib.contextmanager
def _few_collections() -> Iterator[None]:
    """The cyclic garbage collector run rarely while inspect reads, and never over what
    was imported: an audit makes millions of small objects that form no cycle (reports,
    entries, kernel names), and the collector's passes over them, each over everything
    still alive, were a tenth of the CPU of listing the corpus of benchmarks/RESULTS.md.
    Restored on the way out (main() also runs inside other processes, such as tests);
    the pool's workers, forked inside, inherit it."""
    before = gc.get_threshold()
    gc.freeze()
    gc.set_threshold(100_000, 50, 100)
    try:
        yield
    finally:
        gc.set_threshold(*before)
        gc.unfreeze()


def _handle(args: argparse.Namespace) -> int:
    from gate.commands.stdout import Stdout

    # Names come from files and binaries: never let one that cannot be encoded (a
    # terminal or pipe that is not UTF-8) stop the table half-way.
    if isinstance(sys.stdout, io.TextIOWrapper):
        sys.stdout.reconfigure(errors="backslashreplace")
    out = Stdout()  # a closed pipe (| head) stops the table, not the checks
    caps, required = _devices(args)
    scan = not args.no_scan
    names = args.names or args.strict
    limits = _limits(args)
    if _by_distribution(args):
        from gate.commands import environment

        environment.handle(args, caps, required, limits, out)
        out.done()
        return 0
    # Imported past that branch: an environment's audit never needs them (start-up).
    from gate.image.reports import Seen, read_sources, with_images
    from gate.render import inspect as inspect_view
    from gate.render.live import Counter, LiveLine

    read: list[Any] = []  # gate.image.reports.Found: a report and its place in an image
    unmet = []
    strange: list[str] = []  # with --strict: entries of kinds this reader does not know
    # Only names are worth caching: headers alone are read faster than the file is hashed.
    cache = names and not args.no_cache
    # A long read says how far it is: on a terminal in place, in a log every 10 s.
    count = Counter("inspect", say=_say, live=LiveLine(sys.stderr))
    seen = Seen(say=None if args.json else functools.partial(_above, out, count))
    held: str | None = None
    view = _View(args, caps, out, live=count.live is not None)
    for found in read_sources(
        args.paths, platform=args.platform, names=names, scan=scan, limits=limits,
        cache=cache, on_image=seen, progress=count,
        digests=False,  # shown nowhere: only a run's launch accounting needs them
    ):  # fmt: skip
        report = found.report
        read.append(found)
        count.clear()  # the table and the errors never share a line with it
        if held is not None:
            _say(held)
            held = None
        if report.error:
            # Said once another artifact comes; the only artifact's is the command's error.
            held = f"cuda-gate: error: {report.error}"
        view.show(found)
        for reason in _unmet(report, required, strict=args.strict):
            unmet.append(reason)
            _say(f"cuda-gate: error: {reason}")
        for reason in _not_understood(report) if args.strict else ():
            strange.append(reason)
            _say(f"cuda-gate: error: {reason}")
    count.clear()
    view.flush()
    if held is not None and len(read) > 1:
        _say(held)
    reports = [f.report for f in read]
    if args.json or args.output:
        doc = inspect_view.document(reports, caps, names=names, scan=scan)
        _write_document(args, with_images(doc, seen.images, [f.origin for f in read]), out)
    out.flush()
    _exit_status(args, reports, unmet, required, strange)
    out.done()
    return 0


class _View:
    """The console's tables as the reports come: each artifact's table, but the wheels
    named on the command line, each one distribution, whose reports are kept until
    another path's report comes (or the reading ends), then shown as a folder of wheels
    is (:func:`gate.render.environment.console`); every report is an artifact's table
    with ``--files``. Nothing with ``--json``."""

    def __init__(
        self, args: argparse.Namespace, caps: list[Any], out: Stdout, *, live: bool
    ) -> None:
        from gate.reader.artifacts import shown

        self.args, self.caps, self.out, self.live = args, caps, out, live
        off = args.by_file or args.json
        wheels = [] if off else [p for p in args.paths if p.endswith(".whl") and Path(p).is_file()]
        self.wheels = {f"{shown(p)}!": Path(p) for p in wheels}
        self.kept: dict[str, list[ArtifactReport]] = {}

    def show(self, found: Found) -> None:
        """One report: kept with its wheel, or its table written (none for an error)."""
        from gate.render import inspect as inspect_view

        report = found.report
        if self.args.json or self.take(report) or report.error:
            return
        self.flush()
        art = inspect_view.artifact_json(report, self.caps, with_entries=False)
        text = inspect_view.console(art)
        if found.origin:
            text += found.origin.console()
        self.out.write(text, flush=self.live)

    def take(self, report: ArtifactReport) -> bool:
        """Keep ``report`` when a named wheel holds it."""
        wheel, bang, _ = report.path.partition("!")
        if not bang or f"{wheel}!" not in self.wheels:
            return False
        self.kept.setdefault(f"{wheel}!", []).append(report)
        return True

    def flush(self) -> None:
        """The table of the wheels kept so far, if any."""
        from gate.audit.verdicts import judge_all
        from gate.errors import BadInputError
        from gate.reader.distributions import Distribution, Group, Owner, wheel_distribution
        from gate.render import environment as envview
        from gate.rules.targets import Version

        if not self.kept:
            return
        groups = []
        for prefix, reports in self.kept.items():
            path = self.wheels[prefix]
            try:
                dist = wheel_distribution(path)
            except BadInputError:  # its members were read: the zip's error is theirs
                name, version = [*path.name.split("-"), "?"][:2]
                dist = Distribution(name, version, Owner.WHEEL, prefix[:-1])
            members = tuple(r.path.removeprefix(prefix) for r in reports)
            groups.append(Group(dist, tuple(reports), members))
        self.kept.clear()
        text = self.args.cuda_runtime
        runtime = Version.parse(text) if text else None
        verdicts = judge_all(groups, self.caps, runtime=runtime, strict=self.args.strict)
        table = envview.console(verdicts, self.caps, verbose=self.args.verbose, runtime=runtime)
        self.out.write(table, flush=self.live)


def _unmet(report: ArtifactReport, required: list[Any], *, strict: bool) -> list[str]:
    """Why ``report`` fails each required device it fails, in their order: the rule its
    distribution judges it by (:func:`gate.audit.verdicts.outcome`), so that a wheel and
    the folder or environment holding it exit alike. A wheel's member with no code a device
    must run (host code alone) is no part of its distribution's answer: not judged."""
    from gate.audit.artifact import needs_device, unmet

    wheel, bang, _ = report.path.partition("!")
    if bang and wheel.endswith(".whl") and not needs_device(report):
        return []
    return [why for cap in required if (why := unmet(report, cap, strict=strict))]


def _by_distribution(args: argparse.Namespace) -> bool:
    """Whether the paths are read by distribution: asked for, or one is an environment or
    names an image (or fails to: the environment report says why), unless ``--by-file``."""
    from gate.errors import BadInputError
    from gate.image.source import parse
    from gate.reader.distributions import is_environment

    if args.by_file:
        return False
    if args.by_distribution:
        return True
    for text in args.paths:
        try:
            if parse(text) is not None or is_environment(Path(text)):
                return True
        except BadInputError:
            return True
    return False


def _devices(args: argparse.Namespace) -> tuple[list[Any], list[Any]]:
    """The devices to predict for (``--device``, else those detected) and the required ones,
    which are predicted for too."""
    from gate.rules.targets import parse_target_or_capability

    caps = [parse_target_or_capability(d) for d in args.device or ()]
    if args.device is None and not args.no_detect:
        caps = detect_devices()
    required = list(dict.fromkeys(parse_target_or_capability(d) for d in args.require_device))
    return list(dict.fromkeys([*caps, *required])), required


def _above(out: Stdout, count: Counter, text: str) -> None:
    """Text on stdout, the live progress line cleared first."""
    count.clear()
    out.write(text, flush=count.live is not None)


def _say(line: str) -> None:
    print(line, file=sys.stderr, flush=True)


def _write_document(args: argparse.Namespace, doc: dict[str, Any], out: Stdout) -> None:
    """The JSON document to stdout (``--json``) and to ``--output``."""
    import json  # only for --json / --output: keeps start-up short

    from gate.fsutil import write_atomic

    text = json.dumps(doc, indent=1) + "\n"
    if args.json:
        out.write(text)
    if args.output:
        write_atomic(args.output, text.encode("utf-8"))


def _not_understood(report: ArtifactReport) -> list[str]:
    """One reason per entry of a kind this reader does not know (``--strict`` fails them)."""
    from gate.render.inspect import NOT_UNDERSTOOD

    return [
        f"{report.path}: fatbin entry of kind {e.number}"
        + (f" ({e.name!r})" if e.name else "")
        + f": {NOT_UNDERSTOOD} (--strict)"
        for e in report.listing.unknown()
    ]


def _exit_status(
    args: argparse.Namespace,
    reports: list[Any],
    unmet: list[str],
    required: list[Any],
    strange: Sequence[str] = (),
) -> None:
    """BadInputError when nothing was read or a file could not be; NotAcceptedError when a
    required device lacks code, or (``--strict``) an entry is of a kind not understood."""
    from gate.errors import BadInputError, NotAcceptedError
    from gate.render.wording import plural

    if not reports:
        shown = ", ".join(str(p) for p in args.paths)
        raise BadInputError(f"{shown}: no file to inspect (no ELF file, archive, wheel or fatbin)")
    failed = [r for r in reports if r.error]
    if failed and len(reports) == 1:
        raise BadInputError(str(failed[0].error))  # its path and its problem, said once
    if failed:
        raise BadInputError(_unreadable([r.path for r in failed], len(reports)))
    if unmet:
        devices = ", ".join(str(c) for c in required)
        pairs = plural(len(unmet), "artifact/device pair")
        raise NotAcceptedError(f"{pairs} without code for a required device ({devices})")
    if strange:
        raise NotAcceptedError(
            f"{plural(len(strange), 'fatbin entry', 'fatbin entries')} of a kind this version"
            " of cuda-gate does not understand (--strict)"
        )


def _unreadable(failed: list[str], read: int) -> str:
    """``1 of 3 artifacts could not be read: a.so``; ``none of the 3 artifacts could be
    read: a.so and 2 more`` (each was named on its own line above, with its problem)."""
    more = f" and {len(failed) - 1:,} more" if len(failed) > 1 else ""
    if len(failed) < read:
        return f"{len(failed):,} of {read:,} artifacts could not be read: {failed[0]}{more}"
    return f"none of the {read:,} artifacts could be read: {failed[0]}{more}"


def detect_devices() -> list[Any]:
    """Capabilities of the local GPUs from nvidia-smi; none when it is absent or fails."""
    from gate.errors import ToolError
    from gate.system import machine

    try:
        return list(dict.fromkeys(machine.smi_capabilities()))
    except ToolError:
        return []
