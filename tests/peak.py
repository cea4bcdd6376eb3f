"""A command's own peak memory, measured from a small launcher.

A process forked from pytest (or from any large process) reports at least its parent's
resident size as its own peak: Linux carries the high-water mark across fork and exec. The
launcher here is a fresh ``python -I`` that forks the command and reads its rusage
(``os.wait4``); its own size is far below anything the gate's processes reach.
"""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

# Runs the command as its child and writes that child's peak RSS (kB) to argv[1].
_LAUNCH = """
import os, sys
pid = os.fork()
if pid == 0:
    os.execv(sys.argv[2], sys.argv[2:])
_, status, usage = os.wait4(pid, 0)
with open(sys.argv[1], "w") as f:
    f.write(str(usage.ru_maxrss))
sys.exit(os.waitstatus_to_exitcode(status))
"""


def run_measured(
    argv: Sequence[str], peak_file: Path, **kwargs: Any
) -> tuple[subprocess.CompletedProcess[str], int]:
    """``subprocess.run(argv, text=True, capture_output=True, **kwargs)`` through the
    launcher (``argv[0]`` must be a path), with the command's own peak RSS in bytes."""
    launch = [sys.executable, "-I", "-c", _LAUNCH, str(peak_file), *argv]
    done = subprocess.run(launch, capture_output=True, text=True, check=False, **kwargs)
    return done, int(peak_file.read_text()) * 1024
