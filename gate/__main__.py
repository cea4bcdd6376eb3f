"""`python -m gate` runs the command-line interface."""

import sys

from gate.cli import entry

sys.exit(entry())
