"""Real cuTile inputs for the tests, made once from PyPI's wheels and kept between runs.

The wheels (tests/pypi_wheels.TILE) are downloaded into the wheel cache; a venv of their own
(``.work/tileir/venv``) gets them installed offline, and tests/tileir_build.py writes the
inputs into ``.work/tileir/inputs-<key>`` (the key names every pinned wheel, so a new pin
builds anew). Nothing here is hand-made: the bytecode, the cubins and the fatbins are
cuda-tile's, tileiras' and nvFatbin's output.
"""

from __future__ import annotations

import hashlib
import shutil
import sys
from pathlib import Path

from gate import proc
from tests.pypi_wheels import ROOT, TILE, fetch, folder

BUILD = Path(__file__).with_name("tileir_build.py")
WORK = ROOT / ".work" / "tileir"


def _key() -> str:
    """What names every pinned wheel and the build script: a new pin builds anew."""
    text = "\n".join([w.requirement for w in TILE] + [BUILD.read_text()])
    return hashlib.sha256(text.encode()).hexdigest()[:12]


def built() -> Path:
    """Where :func:`inputs` keeps this pinning's inputs (with ``done`` in it once built): an
    offline machine (the GPU tier's) is carried this folder, built here (ci/device-carry.sh)."""
    return WORK / f"inputs-{_key()}"


def inputs() -> Path:
    """The folder of real cuTile inputs, built on first use; ToolError when a wheel cannot be
    downloaded or the build fails (with pip's or Python's message)."""
    out = built()
    key = out.name.removeprefix("inputs-")
    if (out / "done").is_file():
        return out
    wheels = [fetch(w, folder()) for w in TILE]
    venv = WORK / f"venv-{key}"
    python = venv / "bin" / "python"
    if not python.exists():
        shutil.rmtree(venv, ignore_errors=True)
        proc.run_checked([sys.executable, "-m", "venv", str(venv)], what="python -m venv")
        proc.run_checked(
            [str(python), "-m", "pip", "install", "-q", "--no-index", "--no-deps",
             *map(str, wheels)],
            what="pip install (cuTile wheels)", timeout=900,
        )  # fmt: skip
    shutil.rmtree(out, ignore_errors=True)
    proc.run_checked([str(python), str(BUILD), str(out)], what="tileir_build.py", timeout=600)
    return out
