"""Subcommands of `cuda-gate`, one module each, registered in gate.cli.COMMANDS."""
