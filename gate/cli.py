"""The command-line interface: the only place an error becomes an exit status.

Each subcommand lives in ``gate/commands/<name>.py`` with a ``register(subparsers)``
function. Command modules import their heavy dependencies inside the handler, so
``cuda-gate inspect`` does not pay for boto3 or cryptography at start-up.
"""

from __future__ import annotations

import argparse
import importlib
import sys
from collections.abc import Sequence

from gate import __version__
from gate.errors import ExitCode, GateError

COMMANDS = (
    "run",
    "inspect",
    "github",
    "matrix",
    "keygen",
    "verify",
    "upload",
    "evidence",
    "init",
)


def build_parser() -> argparse.ArgumentParser:
    """The full argument parser, one subparser per command module."""
    parser = argparse.ArgumentParser(
        prog="cuda-gate",
        description="Release gate for CUDA build artifacts: targets, SASS, PTX, "
        "both execution paths, signed evidence.",
    )
    parser.add_argument("--version", action="version", version=f"cuda-gate {__version__}")
    subparsers = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for name in COMMANDS:
        module = importlib.import_module(f"gate.commands.{name}")
        module.register(subparsers)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Parse arguments, run one command, and map its outcome to an exit status."""
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        return int(args.handler(args))
    except GateError as e:
        print(f"cuda-gate: error: {e.one_line()}", file=sys.stderr)
        return int(e.exit_code)
    except KeyboardInterrupt:
        print("cuda-gate: interrupted", file=sys.stderr)
        return int(ExitCode.INTERRUPTED)
    except BrokenPipeError:
        return int(ExitCode.OK)
