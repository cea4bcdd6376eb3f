"""The command-line interface: the only place an error becomes an exit status.

Each subcommand lives in ``gate/commands/<name>.py`` with a ``register(subparsers)``
function. Command modules import their heavy dependencies inside the handler, so
``cuda-gate inspect`` does not pay for boto3 or cryptography at start-up.
"""

from __future__ import annotations

import argparse
import contextlib
import importlib
import os
import signal
import sys
import threading
from collections.abc import Iterator, Sequence

from gate import __version__
from gate.errors import ExitCode, GateError, Interrupted

# The import name of each distribution cuda-gate depends on ([project] dependencies in
# pyproject.toml; tests/test_cli_dependencies.py keeps the two equal). A broken install
# that lacks one is said in one line, not as a traceback from deep in the reader.
DEPENDENCIES = {
    "lz4": "lz4",
    "zstandard": "zstandard",
    "cryptography": "cryptography",
    "boto3": "boto3",
    "botocore": "boto3",
    "requests": "requests",
    "jsonschema": "jsonschema",
    "packaging": "packaging",
}

COMMANDS = (
    "run",
    "inspect",
    "github",
    "matrix",
    "keygen",
    "verify",
    "sign",
    "upload",
    "evidence",
    "init",
    "diff",
)


def build_parser(only: str | None = None) -> argparse.ArgumentParser:
    """The argument parser, one subparser per command module (or only the ``only`` one)."""
    parser = argparse.ArgumentParser(
        prog="cuda-gate",
        description="Release gate for CUDA build artifacts: targets, SASS, PTX, "
        "both execution paths, signed evidence.",
    )
    parser.add_argument("--version", action="version", version=f"cuda-gate {__version__}")
    subparsers = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for name in (only,) if only in COMMANDS else COMMANDS:
        module = importlib.import_module(f"gate.commands.{name}")
        module.register(subparsers)
    return parser


def _named_command(argv: Sequence[str] | None) -> str | None:
    """The command ``argv`` starts with, so only its module is imported; else None.

    Top-level options (``--help``, ``--version``) and unknown or absent commands get
    None: the full parser, whose help and errors list every command.
    """
    words = sys.argv[1:] if argv is None else argv
    first = words[0] if words else None
    if first in COMMANDS and not any(w in ("-h", "--help") for w in words):
        return first
    return None


def entry() -> int:
    """The ``cuda-gate`` command: the secrets sealed away first (gate.guard.vault), then main()."""
    from gate.guard import vault  # noqa: PLC0415 - the entry point only; main() stays importable

    try:
        vault.seal()
    except GateError as e:
        print(f"cuda-gate: error: {e.one_line()}", file=sys.stderr)
        return int(e.exit_code)
    return main()


def main(argv: Sequence[str] | None = None) -> int:
    """Parse arguments, run one command, and map its outcome to an exit status."""
    args = build_parser(_named_command(argv)).parse_args(argv)
    try:
        with interrupts_kill_commands():
            return int(args.handler(args))
    except GateError as e:
        print(f"cuda-gate: error: {e.one_line()}", file=sys.stderr)
        return int(e.exit_code)
    except Interrupted as e:
        print(f"cuda-gate: interrupted by {e.name}", file=sys.stderr)
        return e.exit_code
    except KeyboardInterrupt:
        print("cuda-gate: interrupted", file=sys.stderr)
        return int(ExitCode.INTERRUPTED)
    except BrokenPipeError:
        return _stdout_closed()
    except ModuleNotFoundError as e:
        distribution = DEPENDENCIES.get((e.name or "").partition(".")[0])
        if distribution is None:
            raise
        print(
            f"cuda-gate: error: the Python module {e.name} is missing from this installation "
            f"(cuda-gate depends on {distribution}; reinstall it: pip install --force-reinstall "
            f"{distribution})",
            file=sys.stderr,
        )
        return int(ExitCode.TOOL)


def _stdout_closed() -> int:
    """The status when stdout's reader went away (``| head -1``) before the command finished.

    Never 0: whether the command succeeded is not known (a command that finishes its
    checks anyway raises their error if one failed: gate.commands.stdout). 128 + SIGPIPE,
    as a shell reports a command SIGPIPE ended; stdout goes to /dev/null, so the flush at
    exit cannot print "Exception ignored ... BrokenPipeError".
    """
    with contextlib.suppress(OSError, ValueError):  # no descriptor (io.UnsupportedOperation)
        fd = sys.stdout.fileno()
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, fd)
        os.close(devnull)
    return int(ExitCode.BROKEN_PIPE)


# The signals that stop the gate: each first kills every running command.
STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)


@contextlib.contextmanager
def interrupts_kill_commands() -> Iterator[None]:
    """Within: SIGINT, SIGTERM or SIGHUP first kills every running command's process
    group (gate.proc.kill_running), then raises :class:`gate.errors.Interrupted` (a
    KeyboardInterrupt), so the run is recorded as interrupted and nothing it started
    runs on. Outside the main thread, nothing changes.

    gate.proc is looked up when the signal comes, not imported here: no command runs
    before something imports it, and a command that runs none (``cuda-gate inspect
    --no-detect``) does not pay for its import at start-up.
    """
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def interrupted(signum: int, _frame: object) -> None:
        proc = sys.modules.get("gate.proc")
        if proc is not None:
            proc.kill_running()
        raise Interrupted(signum, signal.Signals(signum).name)

    previous = {signum: signal.signal(signum, interrupted) for signum in STOP_SIGNALS}
    try:
        yield
    finally:
        for signum, handler in previous.items():
            signal.signal(signum, handler)
