"""`cuda-gate run`: the whole gate on this machine."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import TYPE_CHECKING

from gate.evidence import DEFAULT_DIR

if TYPE_CHECKING:
    from collections.abc import Callable

    from gate.baseline.resolve import Found
    from gate.config import Config
    from gate.container.place import InImage
    from gate.pipeline import Outcome, RunOptions
    from gate.rules.targets import Target
    from gate.scan.checksums import Checksums

STAGE_CHOICES = ("environment", "probe", "build", "inspect", "execute")


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add the `run` subcommand."""
    parser: argparse.ArgumentParser = subparsers.add_parser(
        "run",
        help="detect the GPU, build, inspect, execute both paths, report",
        description="Run the release gate: environment, probe, build, inspect, execute "
        "(native SASS with JIT impossible, then forced PTX JIT), report.",
    )
    parser.add_argument(
        "--config",
        type=Path,
        default=None,
        metavar="PATH",
        help="the project configuration (default: cuda-gate.toml, else [tool.cuda-gate] in "
        "pyproject.toml, else only the smoke program)",
    )
    parser.add_argument(
        "--evidence",
        type=Path,
        default=Path(DEFAULT_DIR),
        help="evidence folder (default: gate-evidence; replaced on each run)",
    )
    parser.add_argument(
        "--build-dir",
        type=Path,
        default=None,
        help="where to build the probe and smoke program (default: gate-build beside the "
        "evidence folder)",
    )
    parser.add_argument(
        "--prebuilt",
        type=Path,
        default=None,
        metavar="SHA256SUMS",
        help="gate files built elsewhere instead of building: the list (sha256sum's format, "
        "paths relative to it) must match their bytes and name exactly the configured "
        "artifacts; the configuration's build commands are not run (the smoke program is)",
    )
    parser.add_argument(
        "--image",
        default=None,
        metavar="IMAGE",
        help="run inside this delivery image (name[:tag][@sha256:...], as the local podman "
        "or docker holds it; never pulled): environment, probe, smoke program and entry "
        "points in fresh containers of it with the GPUs passed in, its artifacts read from "
        "its own layers, its digest from the runtime's inspection (default: the config's "
        "image; [container] says how it runs)",
    )
    parser.add_argument(
        "--target",
        type=_target_text,
        default=None,
        help="build and inspect for this target (sm_121, sm_90a, sm_120f or 12.1) instead of "
        "the detected one; without a GPU the verdict stays 'not accepted' (exit 4 when "
        "nothing else failed)",
    )
    parser.add_argument(
        "--sass",
        nargs="*",
        type=_code_target_text,
        default=None,
        metavar="TARGET",
        help="SASS targets to embed in the smoke program (default: the target)",
    )
    parser.add_argument(
        "--ptx",
        nargs="*",
        type=_code_target_text,
        default=None,
        metavar="TARGET",
        help="PTX targets to embed in the smoke program (default: the target)",
    )
    parser.add_argument(
        "--timeout",
        type=_seconds,
        default=300.0,
        help="seconds each execution of the smoke program may take before its process group "
        "is killed (entry points set their own)",
    )
    parser.add_argument(
        "--stop-after",
        choices=STAGE_CHOICES,
        default=None,
        help="stop after this stage (the verdict is then not accepted)",
    )
    parser.add_argument(
        "--dump-sass",
        choices=("auto", "always", "never"),
        default="auto",
        help="full SASS dump: only for small artifacts (auto), always, or never",
    )
    parser.add_argument(
        "--nvcc",
        default=None,
        help="the nvcc to use (default: CUDA_GATE_NVCC, PATH, CUDA_HOME, /usr/local/cuda, "
        "NVIDIA's toolkit wheels)",
    )
    parser.add_argument(
        "--python",
        default=None,
        metavar="PATH",
        help="the project's Python (the one with torch) for {python} in builds and entry "
        "points (default: CUDA_GATE_PYTHON, the config's python, else the first python3 on "
        "PATH outside the gate's own virtual environment)",
    )
    parser.add_argument(
        "--signing-key",
        type=Path,
        default=None,
        metavar="PATH",
        help="Ed25519 private key to sign the manifest (default: "
        "CUDA_GATE_SIGNING_KEY_FILE, then the PEM in CUDA_GATE_SIGNING_KEY)",
    )
    parser.add_argument(
        "--no-cuobjdump",
        action="store_true",
        help="skip the cuobjdump cross-check (our reader is the inspector)",
    )
    parser.add_argument(
        "--no-cache",
        action="store_true",
        help="do everything again instead of using the cache: artifacts read, the probe and "
        "smoke program compiled, cuobjdump asked, loaded libraries hashed (CUDA_GATE_CACHE_DIR, "
        "else ~/.cache/cuda-gate)",
    )
    parser.add_argument(
        "--store",
        metavar="URL",
        default=None,
        help="s3://bucket/prefix or a folder (default: CUDA_GATE_STORE, the "
        "config file, else the local evidence store)",
    )
    parser.add_argument(
        "--no-store", action="store_true", help="leave the evidence only in the evidence folder"
    )
    parser.add_argument(
        "--baseline",
        metavar="REF",
        default=None,
        help="compare the device code with an earlier run: an evidence folder, or from the "
        "store (--store) latest-accepted, a revision or a tag of this runner class "
        "(CUDA_GATE_RUNNER_CLASS; else of this runner); a loss fails the run (see "
        "`cuda-gate diff`, [baseline] in the configuration)",
    )
    parser.add_argument(
        "--record-launches",
        action=argparse.BooleanOptionalAction,
        default=None,
        help="record every kernel launch and loaded module of the entry points with the CUPTI "
        "launch recorder (the default; config record_launches = false turns it off; always on "
        "for require_launch)",
    )
    parser.add_argument(
        "--junit-file-attribute",
        action=argparse.BooleanOptionalAction,
        default=None,
        help="put file= (the artifact, loaded library or config file a check is about) on "
        "junit.xml's cases, for GitHub's reporters that annotate it (the composite action "
        "does); off by default: Jenkins xUnit's junit-10.xsd since 2018-12 refuses it",
    )
    parser.add_argument(
        "--wait",
        action="store_true",
        help="when another run holds the evidence or build folder, wait for it instead of "
        "refusing (exit 5)",
    )
    parser.add_argument(
        "--debug",
        action="store_true",
        help="print an internal error's traceback (it is always kept in the evidence folder)",
    )
    parser.add_argument("--quiet", action="store_true", help="no progress lines")
    parser.add_argument(
        "-v",
        "--verbose",
        action="store_true",
        help="list every check on the console, passed and skipped ones too (summary.md "
        "always does); by default only the failed and warned ones",
    )
    parser.set_defaults(handler=handle)


def _target_text(text: str) -> str:
    """``--target`` as typed, refused when empty or not a target (argparse type: exit 2)."""
    from gate.rules.targets import parse_required_target

    return _checked_target(text, parse_required_target)


def _code_target_text(text: str) -> str:
    """A ``--sass``/``--ptx`` target as typed, refused when empty or not a target (argparse)."""
    from gate.rules.targets import Target

    return _checked_target(text, Target.parse)


def _checked_target(text: str, parse: Callable[[str], object]) -> str:
    from gate.errors import ConfigError

    if not text.strip():
        raise argparse.ArgumentTypeError("empty target (like sm_121, sm_90a or 12.1)")
    try:
        parse(text)
    except ConfigError as e:
        # The parser's line names the value and the forms; argparse adds the option.
        raise argparse.ArgumentTypeError(e.message) from e
    return text


def _seconds(text: str) -> float:
    """A positive, finite number of seconds (argparse type)."""
    from gate.config.values import positive_seconds

    def fail(why: str) -> Exception:
        return argparse.ArgumentTypeError(why)

    return positive_seconds(_float(text), fail)


def _float(text: str) -> float:
    try:
        return float(text)
    except ValueError as e:
        raise argparse.ArgumentTypeError(f"not a number: {text!r}") from e


def _refuse_unrecorded(args: argparse.Namespace, project: Config) -> None:
    """``--no-record-launches`` where the configuration needs the recorder: a ConfigError."""
    from gate.errors import ConfigError

    needing = project.recorder_needs()
    if args.record_launches is False and needing:
        raise ConfigError(
            f"--no-record-launches: {project.label} asks for {needing[0][1]}, which needs the "
            "launch recorder"
        )


def handle(args: argparse.Namespace) -> int:
    """Run the pipeline and print the table, the diagnosis and the verdict."""
    from gate.pipeline import run

    err = _Stderr(quiet=args.quiet)
    options = _options(args, err)
    return _told(run(options, err.progress, err.live), err, verbose=args.verbose)


def _options(args: argparse.Namespace, err: _Stderr) -> RunOptions:
    """What was asked, with the configuration, store, key and baseline read before anything
    runs: a bad one fails at once."""
    import os
    import tempfile

    from gate import config
    from gate.commands.sign import load_signer
    from gate.config.options import JUNIT_FILE_ATTRIBUTE, NVCC, SIGNING_KEY, resolve
    from gate.pipeline import RunOptions
    from gate.rules.targets import Target
    from gate.store.settings import load_settings

    target = _target(args.target) if args.target else None
    project = config.load(Path.cwd(), args.config)
    _refuse_unrecorded(args, project)
    image = _image(args, project)
    # In the image, its own nvcc is asked: CUDA_GATE_NVCC names one of this machine's.
    nvcc = args.nvcc if image is not None else resolve(NVCC, args, os.environ).value
    if target is not None and image is None:
        from gate.stages.probe import refuse_unbuildable

        # In the image, its own toolkit is asked, in the probe stage.
        refuse_unbuildable(target, nvcc)
    prebuilt = _prebuilt(args.prebuilt)
    store = None if args.no_store else load_settings(url=args.store, config=project)
    if store is not None and store.local_dir is not None:
        _check_local_store(store.local_dir)
    signer = load_signer(resolve(SIGNING_KEY, args, os.environ, project))
    if signer is not None and signer.file is not None:
        err.line(
            f"cuda-gate: warning: the signing key file {signer.file} stays readable to the "
            "builds and entry points (they run as your user); sign apart instead: run "
            "without a key, then `cuda-gate sign EVIDENCE` where no project code runs"
        )
    with tempfile.TemporaryDirectory(prefix="cuda-gate-baseline-") as work:
        baseline = _baseline(args, project, Path(work) / "baseline")
    return RunOptions(
        evidence=args.evidence,
        build_dir=args.build_dir,
        project_dir=Path.cwd(),
        target=target,
        sass=tuple(Target.parse(t).as_sass() for t in args.sass) if args.sass is not None else None,
        ptx=tuple(Target.parse(t).as_ptx() for t in args.ptx) if args.ptx is not None else None,
        timeout=args.timeout,
        stop_after=args.stop_after,
        dump_sass=args.dump_sass,
        nvcc=nvcc,
        python=args.python,
        use_cuobjdump=not args.no_cuobjdump,
        use_cache=not args.no_cache,
        store_settings=store,
        signer=signer,
        project_config=project,
        wait=args.wait,
        debug=args.debug,
        # Said once the folders are the run's: an error before that stays one line alone.
        first_line=_which_config(project),
        prebuilt=prebuilt,
        baseline=baseline,
        record_launches=args.record_launches,
        image=image,
        junit_file_attribute=resolve(JUNIT_FILE_ATTRIBUTE, args).value,
    )


def _told(outcome: Outcome, err: _Stderr, *, verbose: bool = False) -> int:
    """The checks that need a person's eyes (every one with ``verbose``), what to do
    next, the count, the verdict once, the baseline and the evidence line; the exit
    status. The verdict is said once, on stdout (stderr carries progress and errors)."""
    from gate.commands.stdout import Stdout
    from gate.errors import ExitCode
    from gate.render import text

    record = outcome.record
    verdict = record.verdict
    # A reader gone (`| head`) never stops the run or loses its evidence, and never turns
    # its status into 0 or 141 when the status is known (gate.commands.stdout).
    out = Stdout()
    out.write(text.colour(text.console(record, verbose=verbose)) + "\n")
    if record.baseline is not None:
        from gate.render import diff

        compared = record.baseline
        out.write(
            f"\nBaseline:\n{diff.console(compared.diff, compared.describe(), total=text.width())}\n"
        )
    out.write(f"Evidence: {outcome.evidence}/ ({outcome.manifest}; {outcome.stored})\n")
    out.flush()
    if outcome.interrupted is not None:
        err.line(f"cuda-gate: interrupted by {outcome.interrupted.name}")
        return outcome.interrupted.exit_code
    if outcome.store_error is not None:
        # Nothing is lost: the evidence folder and the spool hold it for `upload --resume`.
        err.line(f"cuda-gate: error: {outcome.store_error.one_line()}")
        # A failed check keeps its own status; 4 says "no device and nothing else wrong",
        # so a store that failed too is said by its own status (20, 22), as when accepted.
        if verdict.accepted or verdict.exit_code == ExitCode.NO_DEVICE:
            return int(outcome.store_error.exit_code)
    if verdict.accepted:
        out.done()  # accepted, but the table did not reach its reader: 141
    return int(verdict.exit_code)


class _Stderr:
    """Progress and message lines on stderr; a closed stderr silences them, nothing else.

    On a terminal (and without --quiet) the live line shows the running command; every
    line printed clears it first.
    """

    def __init__(self, *, quiet: bool) -> None:
        from gate.render.live import LiveLine

        self.quiet, self.closed = quiet, False
        self.live = None if quiet else LiveLine(sys.stderr)

    def progress(self, line: str) -> None:
        if not self.quiet:
            self.line(line)

    def line(self, text: str) -> None:
        if self.closed:
            return
        if self.live is not None:
            self.live.clear()
        try:
            print(text, file=sys.stderr, flush=True)
        except BrokenPipeError:
            from gate.commands.stdout import discard

            self.closed = True
            discard(sys.stderr)


def _image(args: argparse.Namespace, project: Config) -> InImage | None:
    """``--image`` (else the config's ``image``) resolved through the runtime before anything
    runs: a bad reference, an image the runtime lacks or a pin it holds under another
    digest is one line, exit 6; no runtime, exit 3; what cannot work in an image, exit 7."""
    from gate.config.options import IMAGE, resolve

    text = resolve(IMAGE, args, None, project).value
    if text is None:
        return None
    from gate.container.place import resolve as resolve_image
    from gate.errors import ConfigError

    if args.prebuilt is not None:
        raise ConfigError(
            "--prebuilt gates files of this machine; --image gates the image's own: give one"
        )
    needing = project.recorder_needs()
    if needing:
        raise ConfigError(
            f"{needing[0][0]}: {needing[0][1]} needs the launch recorder, which does not run "
            "inside an image"
        )
    settings = project.container
    return resolve_image(
        text, runtime=settings.runtime, gpus=settings.gpus, options=settings.options
    )


def _which_config(project: Config) -> str:
    """One line: the configuration file the run uses, or that none was found, and where."""
    from gate.config import CONFIG_FILE, PYPROJECT

    if project.source is not None:
        return f"config: {project.source}"
    here = Path.cwd()
    above = next(
        (d / CONFIG_FILE for d in here.parents if (d / CONFIG_FILE).is_file()),
        None,
    )
    hint = (
        f"; {above} is above: run from {above.parent} or pass --config {above}"
        if above is not None
        else "; `cuda-gate init` writes one"
    )
    return (
        f"config: none found in {here} (no {CONFIG_FILE}, no [tool.cuda-gate] in "
        f"{PYPROJECT}): only the built-in smoke program is gated{hint}"
    )


def _prebuilt(path: Path | None) -> Checksums | None:
    """The ``--prebuilt`` list, read and every file checked against it before anything runs:
    bytes that are not the built ones are one line and exit 6, never a gate run."""
    if path is None:
        return None
    from gate.scan import checksums

    listed = checksums.read(path)
    listed.verify()
    return listed


def _check_local_store(folder: Path) -> None:
    """A store folder under a file can never be created: say so before anything runs."""
    from gate.errors import ConfigError

    existing = next((p for p in (folder, *folder.parents) if p.exists()), None)
    if existing is not None and not existing.is_dir():
        raise ConfigError(f"the evidence store {folder}: {existing} is not a folder")


def _target(text: str) -> Target:
    """``sm_90a`` keeps its variant; ``compute_121`` and ``12.1`` mean ``sm_121``."""
    from gate.rules.targets import parse_required_target

    return parse_required_target(text)


def _baseline(args: argparse.Namespace, project: Config, dest: Path) -> Found | None:
    """The ``--baseline`` run, read (and from the store, downloaded and checked) before
    anything runs: a reference that names nothing stops the run at once."""
    if args.baseline is None:
        return None
    import os

    from gate.baseline.resolve import Which, from_folder, from_store, looks_like_folder
    from gate.config.options import RUNNER_CLASS, resolve
    from gate.system import ci

    if looks_like_folder(args.baseline):
        return from_folder(Path(args.baseline), args.baseline)
    if args.no_store:
        from gate.errors import ConfigError

        raise ConfigError(
            f"--baseline {args.baseline} is read from the store; --no-store says none"
        )
    # No --runner-class here: the variable, else this runner.
    runner_class = resolve(RUNNER_CLASS, None, os.environ).value
    which = Which(runner_class, None if runner_class else ci.runner_name(os.environ))
    return from_store(args.baseline, which, dest, store_url=args.store, config=project)
