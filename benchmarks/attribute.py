"""Each file's read time inside one whole-environment `cuda-gate inspect` (for bench_corpus.py).

    python benchmarks/attribute.py OUT INSPECT-ARGUMENT ...

Runs ``cuda-gate inspect INSPECT-ARGUMENT ...`` in this process (its output is the
caller's to discard), with the reader's per-file step (``read_found`` as
gate.scan.parallel calls it) timed: each file read, in whichever process reads it
(the pool's workers are forked from this one and inherit the timing), appends
``seconds<TAB>path`` to OUT. bench_corpus.py sums these per
distribution to attribute the audit's wall time to each distribution in proportion.
The figures come from a run of their own, never from a timed one.
"""

from __future__ import annotations

import os
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from gate import cli  # noqa: E402
from gate.reader.artifacts import Found, Unreadable  # noqa: E402
from gate.reader.read import ArtifactReport  # noqa: E402
from gate.scan import parallel  # noqa: E402
from gate.scan.files import read_found  # noqa: E402


def main() -> int:
    out, argv = sys.argv[1], sys.argv[2:]
    fd = os.open(out, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_APPEND, 0o644)

    def timed(found: Found | Unreadable, **kwargs: Any) -> Iterator[ArtifactReport]:
        start = time.perf_counter()
        reports = list(read_found(found, **kwargs))
        # One write per line, O_APPEND: lines from several processes never mix.
        os.write(fd, f"{time.perf_counter() - start:.6f}\t{os.fsdecode(found.path)}\n".encode())
        return iter(reports)

    setattr(parallel, "read_found", timed)  # noqa: B010  (what the pool's workers call)
    status = cli.main(["inspect", *argv])
    os.close(fd)
    return 0 if status in (0, 1) else status


if __name__ == "__main__":
    raise SystemExit(main())
