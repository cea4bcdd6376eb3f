"""`python -m gate` runs the command-line interface."""

import sys

from gate.cli import main

sys.exit(main())
