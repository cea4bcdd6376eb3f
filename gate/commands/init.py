"""`cuda-gate init`: write a commented starting configuration that `cuda-gate run` accepts."""

from __future__ import annotations

import argparse
import re
from pathlib import Path

# Lines starting with "# " followed by TOML are examples; "## " lines are prose. The
# file loads as written, and loads with every example uncommented (tests check both).
HEADER = """\
## cuda-gate configuration, written by `cuda-gate init`; `cuda-gate run` reads it.
## Lines starting with a single "#" are examples: remove the "# " to use them.
## Relative paths are relative to the folder holding this file.
"""

BODY = """\

## The project's Python (the one with torch) for {python} below; a command name, or a
## path relative to this file. Default: --python, CUDA_GATE_PYTHON, else the first
## python3 on PATH outside the gate's own virtual environment.
# python = ".venv/bin/python"
## Targets the artifacts must carry, besides the detected GPU's own (always required).
## The form counts: sm_90a needs sm_90a code; sm_120 is met by sm_120 or sm_120f, never
## by sm_120a (it does not run on 12.1). docs/configuration.md has the table.
# targets = ["sm_90", "sm_121"]
## Capabilities to predict kernel routes for in the report (H200 9.0, DGX Spark 12.1).
# devices = ["9.0", "12.1"]
## Kernels every artifact must carry, for each required target, as SASS and as PTX: a
## plain name (scale), a qualified one (ns::scale), with template arguments, or mangled.
# kernels = ["scale_f32"]
## The host the artifacts ship for (default: the device's only host class where it has
## one, 12.1 -> aarch64; else this machine).
# host = "aarch64"
## An artifact this run's build did not write (older than the build): "warn" or "fail".
# stale_artifacts = "fail"
## Loaded libraries (file-name globs) judged per kernel, like the project's own
## artifacts; every other loaded library is only recorded.
# strict_libraries = ["libmine*.so*"]
## Also build and run the built-in smoke program (it proves the toolchain and driver).
smoke = true

## Build commands, run in order before inspection. A command is a list of arguments or
## one string split like a shell command. In commands and env values, placeholders
## stand for the required targets:  {sm} sm_90   {compute} compute_90   {cc} 90
## {capability} 9.0   {gencode} -gencode flags (SASS + PTX)   {cmake_archs} 90
## {torch_arch_list} 9.0+PTX   {nvcc} the gate's nvcc, so the build uses the toolkit
## the evidence records   {python} the project's Python (see python above)
## ({{sm}} is a literal {sm}; ${VAR} is left alone).
# [[build]]
# name = "configure"
# command = [
#   "cmake", "-S", ".", "-B", "build",
#   "-DCMAKE_CUDA_ARCHITECTURES={cmake_archs}", "-DCMAKE_CUDA_COMPILER={nvcc}",
# ]
# timeout = 1800
#
# [[build]]
# name = "compile"
# command = "cmake --build build --parallel"
# env = { TORCH_CUDA_ARCH_LIST = "{torch_arch_list}" }
#
# [[build]]
# name = "extension"
# command = ["{python}", "setup.py", "build_ext", "--inplace"]

## The final artifacts that ship: globs ("**" allowed) or wheels (*.whl). A glob that
## matches nothing after the build is an error.
# [[artifact]]
# path = "build/*.so"
# kernels = ["scale_f64"]

## Real entry points: each runs natively (PTX JIT disabled) and through forced PTX JIT.
## The shared libraries they load, dlopen included, are recorded and inspected. Commands
## and env values take {python} and {nvcc} only. expected_output is a regular expression
## (Python's re), searched in stdout and stderr together; without it only the exit
## status counts. '(?m)^PASS$' wants a line that is exactly PASS ("PASS" alone would
## also match "BYPASS"); single quotes keep backslashes literal: '^max error: 0\\.0+$'.
# [[entry_point]]
# name = "app"
# command = ["build/app", "--self-test"]
# cwd = "."
# env = { OMP_NUM_THREADS = "1" }
# timeout = 300
# expected_returncode = 0
# expected_output = '(?m)^PASS$'
#
# [[entry_point]]
# name = "torch-ext"
# command = ["{python}", "-m", "mypkg.selftest"]
# expected_output = 'max error: 0\\.0+\\b'

## Sign the manifest with an Ed25519 key: `cuda-gate keygen` writes cuda-gate.key (never
## commit it; in CI pass it as the secret CUDA_GATE_SIGNING_KEY) and cuda-gate.pub.
# [signing]
# key_file = "cuda-gate.key"

## Where `cuda-gate run` and `cuda-gate upload` store evidence. Without this table it is
## a local folder, $XDG_DATA_HOME/cuda-gate/evidence (~/.local/share/cuda-gate/evidence);
## a folder of your own is  url = "/srv/cuda-gate/evidence". --store and the CUDA_GATE_*
## variables override this table. Credentials never go here: S3 uses the AWS chain
## (environment, profile, instance role). An S3 (or S3-compatible) bucket:
# [store]
# url = "s3://my-evidence-bucket/cuda-gate"
# region = "us-east-1"
# endpoint = "https://s3.example.com"
# path-style = true
# object-lock-mode = "COMPLIANCE"
# object-lock-days = 365

## The release policy: what each finding about the artifacts' device code does. The
## values shown are the defaults, the gate's behaviour without the table; an unknown key
## or value is an error. docs/configuration.md ("Release policy") has every rule.
# [policy]
# missing_sass = "fail"       # a required target without SASS: "fail" or "warn"
# ptx_as_device_code = false  # PTX that JIT-compiles for it stands in for the SASS
# missing_ptx = "fail"        # a required target without PTX: "fail", "warn", "allow"
# ptx_for_highest = "off"     # compute_N of the highest required N: "off", "warn", "fail"
# surplus_targets = "allow"   # SASS no required target asked for: "allow", "warn", "fail"
# trap_stubs = "fail"         # kernels that only trap on a checked device: "fail", "warn"
# launch_coverage = "off"     # kernels no entry point launched: "off", "warn", "fail"
## Per runner class (CUDA_GATE_RUNNER_CLASS), devices every artifact must run on:
# required_devices = { gb10 = ["12.1"], h200 = ["9.0"] }

## What a loss against `cuda-gate run --baseline REF` or `cuda-gate diff OLD NEW` does:
## each rule fails by default; "warn" keeps it in the report without failing the run.
## ([baseline] at the top level is the same table: give one of the two.)
# [policy.baseline]
# dropped_artifact = "fail"
# dropped_target = "fail"
# dropped_kernel = "fail"
# lost_native_route = "fail"
# newer_driver = "warn"
"""

TEMPLATE = HEADER + BODY

# What a project's .gitignore should hold: the private key `cuda-gate keygen` writes, and
# the folders `cuda-gate run` writes beside the project (gate.pipeline's defaults).
GITIGNORE_COMMENT = "# cuda-gate: the signing key (never commit it) and the folders a run writes"
GITIGNORE_LINES = ("/cuda-gate.key", "/gate-evidence/", "/gate-build/")
_TABLE = re.compile(r"^(#? ?)\[(\[?)([a-z_.]+)(\]?)\]", re.MULTILINE)


def template(fmt: str) -> str:
    """The starting configuration: a cuda-gate.toml, or a pyproject.toml section."""
    if fmt == "toml":
        return TEMPLATE
    # Top-level keys sit under [tool.cuda-gate], before any sub-table.
    return HEADER + "[tool.cuda-gate]\n" + _TABLE.sub(r"\1[\2tool.cuda-gate.\3\4]", BODY)


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add the `init` subcommand."""
    parser: argparse.ArgumentParser = subparsers.add_parser(
        "init",
        help="write a commented starting configuration (cuda-gate.toml)",
        description="Write a commented starting configuration: cuda-gate.toml, or a "
        "[tool.cuda-gate] section appended to pyproject.toml.",
    )
    parser.add_argument(
        "--format",
        choices=("toml", "pyproject"),
        default="toml",
        help="cuda-gate.toml (default), or a section appended to pyproject.toml",
    )
    parser.add_argument(
        "--dir", type=Path, default=Path(), help="the project folder (default: here)"
    )
    parser.add_argument(
        "--force",
        action="store_true",
        help="overwrite an existing cuda-gate.toml (a pyproject.toml section is never rewritten)",
    )
    parser.add_argument(
        "--gitignore",
        action="store_true",
        help="append the lines .gitignore lacks (the signing key, gate-evidence/, gate-build/); "
        "without it they are only printed",
    )
    parser.set_defaults(handler=handle)


def handle(args: argparse.Namespace) -> int:
    """Write the file, then load it back so what we wrote is known to be valid."""
    from gate import config
    from gate.errors import ConfigError
    from gate.fsutil import write_atomic

    folder: Path = args.dir
    if not folder.is_dir():
        raise ConfigError(f"{folder}: no such folder")
    if args.format == "toml":
        target = folder / config.CONFIG_FILE
        if target.exists() and not args.force:
            raise ConfigError(f"{target}: already exists", hint="use --force to overwrite it")
        text = template("toml")
    else:
        target = folder / config.PYPROJECT
        existing = target.read_text(encoding="utf-8") if target.exists() else ""
        if re.search(r"^\[+tool\.cuda-gate[.\]]", existing, re.MULTILINE):
            # Never rewrite a person's pyproject.toml, --force or not.
            raise ConfigError(f"{target}: already has a [tool.cuda-gate] section; edit that")
        text = template("pyproject")
        if existing.strip():
            text = existing.rstrip("\n") + "\n\n" + text
    # Checked before writing: a broken pyproject.toml stays untouched, and what we write loads.
    config.parse_text(text, target)
    # Atomically; an existing file keeps its mode.
    mode = target.stat().st_mode & 0o777 if target.exists() else 0o644
    write_atomic(target, text.encode("utf-8"), mode=mode)
    print(f"wrote {target}; it runs the smoke program only so far")
    _offer_gitignore(folder / ".gitignore", apply=args.gitignore)
    print("next: add your [[build]], [[artifact]] and [[entry_point]] tables, then `cuda-gate run`")
    return 0


def missing_ignores(existing: str) -> tuple[str, ...]:
    """The lines of :data:`GITIGNORE_LINES` that ``existing`` (a .gitignore) lacks.

    A line counts as present in any of git's equivalent spellings for a top-level
    entry (``gate-evidence``, ``gate-evidence/``, ``/gate-evidence/``).
    """
    have = {line.strip().strip("/") for line in existing.splitlines()}
    return tuple(line for line in GITIGNORE_LINES if line.strip("/") not in have)


def _offer_gitignore(path: Path, *, apply: bool) -> None:
    """Print the .gitignore lines the project lacks; append them only when asked."""
    from gate.errors import ConfigError
    from gate.fsutil import write_atomic

    try:
        existing = path.read_text(encoding="utf-8") if path.exists() else ""
    except (OSError, UnicodeDecodeError) as e:
        raise ConfigError(f"{path}: cannot read: {e}") from e
    missing = missing_ignores(existing)
    if not missing:
        return
    if not apply:
        # Never a silent change to a file the user owns: say what to add, and how.
        print(f"add to {path} (or run again with --gitignore to append them):")
        print("\n".join(f"  {line}" for line in missing))
        return
    head = existing if not existing or existing.endswith("\n") else existing + "\n"
    block = "\n".join((GITIGNORE_COMMENT, *missing)) + "\n"
    text = head + ("\n" if head else "") + block
    mode = path.stat().st_mode & 0o777 if path.exists() else 0o644
    # Through a link to the file it names: the link stays a link.
    write_atomic(path.resolve(), text.encode("utf-8"), mode=mode)
    print(f"appended to {path}: {', '.join(missing)}")
